// Package registry is wakegate's state behind one small contract: the
// records (homes, apps registered at runtime, apps' desired states, the
// target index and the roll target), lifecycle locks, session reports and
// change notifications. The contract lives here; the backends live beneath
// it, one package each, and both pass the conformance suite in
// registry/registrytest unchanged:
//
//   - registry/bolt: the embedded store, one bbolt file serving one
//     gateway;
//   - registry/redis: the store a fleet of gateways shares.
//
// Where things are:
//
//   - store.go: Store, the records' types (Home, Target, Lease), Cond and
//     the errors every backend returns;
//   - records.go: every kind of record in one shape. A backend implements
//     Tables once (get, list, compare-and-set put and delete of JSON under
//     a key); Records[T] types it (Homes, Apps, AppStates, TargetIndex,
//     Targets); typed.go gives every backend the typed methods (GetHome,
//     PutApp, ...) over its Tables, so a new kind of record adds nothing to
//     any backend;
//   - check.go: the checks every backend runs on a write (Cond.Check,
//     Cond.CheckDelete, Home.Validate, CheckLease, CheckReport);
//   - fence.go: Fence and Fence.Check, the change keys, Notifier and
//     Changes (the in-process waiters both backends use);
//   - Locker, SessionReports and Notifier (store.go, fence.go): the
//     locks, the session reports and the change notifications, each an
//     interface of its own;
//   - capability.go: what a store may offer beside Store (Fleet, Health,
//     Pinger, WriteHealth, Blobs), asked for by capability
//     (store.(registry.Fleet)), never by a backend's type;
//   - claims.go: the target index's protocol (ClaimTarget and the rest);
//     update.go: a home's read-change-write under conflicts; scan.go:
//     homes page by page; codec.go: the fast decoder of the records read
//     in bulk; apps.go, appstate.go, homesettings.go, duration.go: the
//     records' own shapes;
//   - certstore: certmagic's storage over a store's Blobs and locks.
//
// DESIGN rules that live here: 15 (every record written by a
// compare-and-set on generation and owner, a stale writer refused with
// ErrConflict: Cond.Check, run by bolt in its transaction and by redis's
// script on the server), 16 and 32's lock and lease parts (lifecycle
// locks are leases with a TTL and a strictly increasing fencing token;
// a write under a lease carries its Fence, which the store checks in the
// same atomic step: Fence.Check; a lock command a Redis client gave up on
// is cleaned up by that client, registry/redis lockcleanup.go), the fleet
// half of 1 (one lock per home across the fleet), the store's half of 28
// (the runner in a home's record; the epoch that tells a gateway its
// shared store lost its data, Fleet.Epoch) and 30 (a store that cannot be
// trusted is refused with the way out: bolt.OpenError,
// redis.ErrNewerSchema).
package registry
