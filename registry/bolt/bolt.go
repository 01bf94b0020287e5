package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Bucket and key names of the bbolt file.
var (
	bucketHomes    = []byte(registry.KindHome.Table)   // home id -> JSON registry.Home
	bucketTarget   = []byte(registry.KindTarget.Table) // keyTarget -> JSON registry.Target
	bucketLocks    = []byte("locks")                   // lock name -> JSON boltLock
	bucketLockSeq  = []byte("lockseq")                 // lock name -> last fencing token, 8 bytes big endian
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
// compare-and-set and lock atomic. Session reports are kept in memory, not
// in the file (sessions.go). A method checks its context before
// it starts and again once its transaction is open; a transaction itself is
// short and is not interrupted.
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
	// changes are Changed's waiters (fence.go).
	changes registry.Changes
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

// getLock reads the stored lease of name inside tx.
func getLock(tx *bbolt.Tx, name string) (boltLock, bool, error) {
	raw := tx.Bucket(bucketLocks).Get([]byte(name))
	if raw == nil {
		return boltLock{}, false, nil
	}
	var l boltLock
	if err := json.Unmarshal(raw, &l); err != nil {
		return boltLock{}, true, fmt.Errorf("decode stored lock: %w", err)
	}
	return l, true, nil
}

// putLock stores the lease of name inside tx.
func putLock(tx *bbolt.Tx, name string, l boltLock) error {
	raw, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode lock: %w", err)
	}
	return tx.Bucket(bucketLocks).Put([]byte(name), raw)
}

// nextToken advances and returns the fencing token of name inside tx.
func nextToken(tx *bbolt.Tx, name string) (uint64, error) {
	seq := tx.Bucket(bucketLockSeq)
	var last uint64
	if raw := seq.Get([]byte(name)); raw != nil {
		if len(raw) != 8 {
			return 0, fmt.Errorf("decode fencing token: %d bytes, want 8", len(raw))
		}
		last = binary.BigEndian.Uint64(raw)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], last+1)
	if err := seq.Put([]byte(name), buf[:]); err != nil {
		return 0, fmt.Errorf("store fencing token: %w", err)
	}
	return last + 1, nil
}

// Lock takes the named lock for holder for ttl, with a fencing token greater
// than every token issued for name before. It returns registry.ErrLocked at once when
// a live lease exists, including one held by the same holder (locks are not
// re-entrant). An expired lease is taken over.
func (b *Store) Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error) {
	if err := registry.CheckLease(name, holder, ttl); err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	var lease registry.Lease
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		now := b.clock()
		cur, found, err := getLock(tx, name)
		if err != nil {
			return err
		}
		if found && now.Before(cur.Expires) {
			return fmt.Errorf("held by %s until %s: %w", cur.Holder, cur.Expires.Format(time.RFC3339Nano), registry.ErrLocked)
		}
		token, err := nextToken(tx, name)
		if err != nil {
			return err
		}
		l := boltLock{Holder: holder, Token: token, Expires: now.Add(ttl)}
		if err := putLock(tx, name, l); err != nil {
			return err
		}
		lease = registry.Lease{Name: name, Holder: holder, Token: token, ExpiresAt: l.Expires}
		return nil
	})
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	return lease, nil
}

// currentLease reports whether l is the live lease stored for its name at
// now, as registry.ErrLeaseLost wrapped with the reason when it is not.
func currentLease(tx *bbolt.Tx, l registry.Lease, now time.Time) error {
	cur, found, err := getLock(tx, l.Name)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("not held: %w", registry.ErrLeaseLost)
	case cur.Holder != l.Holder || cur.Token != l.Token:
		return fmt.Errorf("held by %s with token %d, not %s with token %d: %w",
			cur.Holder, cur.Token, l.Holder, l.Token, registry.ErrLeaseLost)
	case !now.Before(cur.Expires):
		return fmt.Errorf("expired at %s: %w", cur.Expires.Format(time.RFC3339Nano), registry.ErrLeaseLost)
	}
	return nil
}

// Renew extends a held lease to now+ttl, keeping its token; registry.ErrLeaseLost if
// it is no longer current, including when its TTL ran out.
func (b *Store) Renew(ctx context.Context, l registry.Lease, ttl time.Duration) (registry.Lease, error) {
	if ttl <= 0 {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: ttl %s is not positive", l.Name, ttl)
	}
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		now := b.clock()
		if err := currentLease(tx, l, now); err != nil {
			return err
		}
		l.ExpiresAt = now.Add(ttl)
		return putLock(tx, l.Name, boltLock{Holder: l.Holder, Token: l.Token, Expires: l.ExpiresAt})
	})
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: %w", l.Name, err)
	}
	return l, nil
}

// Unlock releases a held lease; registry.ErrLeaseLost if it is no longer current,
// including when its TTL ran out (the expired record is then cleared if
// nobody took it over). The name's fencing sequence is kept.
func (b *Store) Unlock(ctx context.Context, l registry.Lease) error {
	var lost error
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		cur, found, err := getLock(tx, l.Name)
		if err != nil {
			return err
		}
		lost = currentLease(tx, l, b.clock())
		ours := found && cur.Holder == l.Holder && cur.Token == l.Token
		if lost != nil && !ours {
			return lost
		}
		// Ours, live or expired: either way nobody else holds it.
		return tx.Bucket(bucketLocks).Delete([]byte(l.Name))
	})
	if err == nil {
		b.changes.Fire(l.Name)
	}
	if err == nil {
		err = lost
	}
	if err != nil {
		return fmt.Errorf("registry: unlock %s: %w", l.Name, err)
	}
	return nil
}

var _ registry.Store = (*Store)(nil)
