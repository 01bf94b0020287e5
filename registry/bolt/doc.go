// Package bolt is the embedded store: registry.Store on one bbolt file in
// data_dir, for a gateway that runs alone (a fleet shares registry/redis).
//
// What lives here: the records in buckets, each write one bbolt
// transaction (bolt.go, records.go); the fence checked in the same
// transaction as generation and owner (fence.go); the open in steps that
// refuses a file it cannot trust and says the way out (open.go), its
// format version and migrations (schema.go), the offline check, backup
// and drop of records (check.go); the session reports, kept in memory so
// that an idle gateway writes nothing to the file (sessions.go); the
// leases of the lifecycle locks, kept in memory so that a wake writes no
// lock before it starts the home (leases.go); the
// disk's write health, looked at every second without a write
// (health.go); a cursor over homes (records.go, ScanHomes) and the seed of
// many homes in one transaction for benchmarks (seed.go).
//
// DESIGN rules that live here: 15 and the fence of 32 for this backend
// (registry.Cond.Check and registry.Fence.Check, run inside one
// transaction), 30 (a store file that is empty, truncated, damaged, of a
// newer format or holding records that do not decode is refused with the
// way out: OpenError.Hint), and the lock half of 16 on one machine (leases
// with strictly increasing fencing tokens, across restarts through an
// epoch kept in the file; leases that older gateways stored are cleared
// at open, since the file lock proves their process gone).
package bolt
