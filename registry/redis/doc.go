// Package redis is the shared store: registry.Store on one Redis server
// (or a Sentinel-managed primary, or a Cluster, every key under one hash
// tag), shared by every gateway of a fleet.
//
// What lives here: the client and the change subscription (redis.go); the
// Lua scripts that check every guarded write on the server (scripts.go);
// leases and session reports (leases.go), and the clean-up of a lock
// command whose reply was lost (lockcleanup.go); each gateway run's claim
// on its instance name, renewed with its session reports (names.go); what the fleet offers
// beside records, registry.Fleet: epoch, persistence, questions between
// instances (fleet.go), dropped verdicts (verdicts.go), operators' leases
// (adminleases.go); certificate blobs (blobs.go); the format version
// (schema.go) and the reachability probe (reach.go).
//
// DESIGN rules that live here: the fleet half of 1 (one lock per home
// across the fleet), 15 (compare-and-set on generation and owner, checked
// in the server by casScript), 16 and 32's lock and lease parts (leases
// with a TTL and a fencing token checked atomically with every guarded
// write; a lock command the client gave up on is cleaned up by that
// client), the store's half of 28 (the epoch that tells a store that lost
// its data) and 30 (a store of a newer format is refused: ErrNewerSchema).
package redis
