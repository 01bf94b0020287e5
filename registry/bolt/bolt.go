package bolt

import (
	"context"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Bucket and key names of the bbolt file.
var (
	bucketHomes    = []byte(registry.KindHome.Table)   // home id -> JSON registry.Home
	bucketTarget   = []byte(registry.KindTarget.Table) // keyTarget -> JSON registry.Target
	bucketLocks    = []byte("locks")                   // lock name -> JSON boltLock; kept empty (leases.go)
	bucketLockSeq  = []byte("lockseq")                 // keyLockEpoch -> the lock epoch (leases.go); lock name -> last fencing token, of older gateways
	bucketSessions = []byte("sessions")                // instance -> JSON boltSessions; kept empty (sessions.go)
	keyTarget      = []byte(registry.TargetRecord)
)

// boltLockTimeout bounds the wait for the file lock of a bbolt file, so a
// second process opening the same file fails fast instead of hanging.
const boltLockTimeout = time.Second

// Options tunes a Store store.
type Options struct {
	// Now is the clock used for lease and session-report expiry.
	// Default (nil): time.Now.
	Now func() time.Time
	// MustHoldData, when not empty, says why the store must already exist
	// and hold data (for example "data_dir holds home folders"): a missing
	// or empty file is then refused with ProblemMissing or ProblemEmpty
	// instead of becoming a new store. Default "": a missing or empty file
	// becomes a new, empty store.
	MustHoldData string
}

// Store is a registry.Store backed by a bbolt file; it survives restarts.
//
// One process at a time may open the file (bbolt holds an exclusive file
// lock), so Store serves a single gateway; a fleet shares a Redis store.
// Writes are serialised by bbolt, each in one transaction, which makes every
// compare-and-set atomic. Session reports and the leases of the lifecycle
// locks are kept in memory, not in the file (sessions.go, leases.go); a
// fenced write checks its lease inside its transaction. A method checks its
// context before it starts and again once its transaction is open; a
// transaction itself is short and is not interrupted.
//
// Lock semantics specific to this implementation, shared by any registry.Store that
// passes the conformance suite:
//   - Locks are not re-entrant: a holder that calls Lock again on a lease it
//     still holds gets registry.ErrLocked, like any other holder.
//   - A lease whose TTL has run out is lost even if nobody took it yet: Renew
//     and Unlock of it return registry.ErrLeaseLost, and the holder must Lock again
//     (receiving a new fencing token).
//   - Fencing tokens are never reused for a name, across unlocks, expiries
//     and restarts.
type Store struct {
	// Typed is the typed record methods over this store's Tables.
	registry.Typed

	db  *bbolt.DB
	now func() time.Time
	// commits runs the writes, joining those that arrive together into one
	// transaction (commit.go).
	commits committer
	// released names the lifecycle locks found, and released, at open
	// (open.go, clearDead).
	released []string
	// leftBy is the pid of the process that held the file before and
	// ended without closing it (its pid file was still there); 0 if none.
	leftBy int
	// changes are Changed's waiters (fence.go).
	changes registry.Changes
	// leases are the live lifecycle locks, in memory (leases.go).
	leases leaseTable
	// health is whether the disk takes writes (health.go).
	health writeHealth
	// reports are the instances' session reports, in memory (sessions.go).
	reports sessionReports
	// migrated is what Open did to an older format (schema.go).
	migrated Migrated
}

// boltLock is the stored form of a held lease.
type boltLock struct {
	Holder  string    `json:"holder"`
	Token   uint64    `json:"token"`
	Expires time.Time `json:"expires"`
}

// boltSessions is the stored session report of one gateway instance, as
// files written before reports were kept in memory hold it (sessions.go).
type boltSessions struct {
	Counts  map[string]int `json:"counts"`
	Expires time.Time      `json:"expires"`
}

// Close releases the file and its lock. Calling it again is a no-op; other
// methods fail after it.
func (b *Store) Close() error {
	removePIDFile(b.db.Path())
	if f := b.health.file; f != nil {
		_ = f.Close() // again after a first Close: os.ErrClosed
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("registry: close bolt store %s: %w", b.db.Path(), err)
	}
	return nil
}

// ReleasedLocks names the lifecycle locks that Open found and
// released: leases of a process that ended without releasing them.
func (b *Store) ReleasedLocks() []string { return append([]string(nil), b.released...) }

// LeftOpenBy returns the pid of the process that held the store before
// this one and ended without closing it (a crash, a SIGKILL), as its pid
// file, still there at open, says; 0 when the last holder closed it (or
// wrote no pid file). Operations it was running on homes (a wake, a roll,
// a suspend) were cut: their records say so, and the engine settles them.
func (b *Store) LeftOpenBy() int { return b.leftBy }

// clock returns the current time without its monotonic reading, so that the
// value returned to callers equals the one stored.
func (b *Store) clock() time.Time { return b.now().Round(0) }

// view runs fn in a read transaction after checking ctx.
func (b *Store) view(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return boltUnavailable(b.db.View(func(tx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(tx)
	}))
}

// update runs fn in a write transaction after checking ctx, both before and
// after waiting for its turn, possibly with other writes that arrived
// beside it (committer). An error from fn rolls back every write of fn.
func (b *Store) update(ctx context.Context, fn func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := b.commits.do(ctx, func(tx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(tx)
	})
	b.health.note(err)
	if diskFailure(err) {
		return &unwritableErr{err: err}
	}
	return boltUnavailable(err)
}

var _ registry.Store = (*Store)(nil)
