package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Leases (the lifecycle locks) of the embedded store are kept in memory,
// not in the file. bbolt's file lock lets one process open the file, and
// a lease outlives its process in no useful way: the next open would
// clear it anyway (clearDead), since the file lock proves its holder
// gone. Writing them cost a transaction (two fdatasyncs of state.db) to
// take a lock and another to release it, on every wake and every stop,
// before the home's process could start. The fence of a write is checked
// against the leases in memory, inside the write's transaction, as it was
// against the stored ones.
//
// Fencing tokens still never repeat for a name, across restarts too: the
// file keeps an epoch, raised by one at every open (in the transaction
// that open writes anyway), and a token is the epoch in its high bits and
// a counter of this process in its low ones. Tokens of older gateways,
// which counted from 1 per name in the file, are below the first epoch's.

// Token layout: the epoch above tokenEpochShift bits, a counter of this
// process below.
const tokenEpochShift = 40

// keyLockEpoch is the epoch's key in the bucket of fencing sequences
// (bucketLockSeq): 8 bytes big endian, like the sequences older gateways
// kept there. It starts with a byte no lock name of this gateway has, and
// this gateway reads no other key of that bucket.
var keyLockEpoch = []byte("\x00epoch")

// leaseTable holds the live leases of one open store. The zero value is
// not ready: open sets epoch.
type leaseTable struct {
	mu    sync.Mutex
	held  map[string]boltLock
	epoch uint64 // this process's epoch (tokenEpochShift)
	last  uint64 // the last counter handed out in this epoch
}

// raiseEpoch reads the epoch of the file inside tx, stores the next one
// and returns it.
func raiseEpoch(tx *bbolt.Tx) (uint64, error) {
	seq := tx.Bucket(bucketLockSeq)
	var epoch uint64
	if raw := seq.Get(keyLockEpoch); raw != nil {
		if len(raw) != 8 {
			return 0, fmt.Errorf("decode lock epoch: %d bytes, want 8", len(raw))
		}
		epoch = binary.BigEndian.Uint64(raw)
	}
	epoch++
	if epoch >= 1<<(64-tokenEpochShift) {
		return 0, fmt.Errorf("lock epoch %d: the file was opened more times than fencing tokens can count", epoch)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], epoch)
	if err := seq.Put(keyLockEpoch, buf[:]); err != nil {
		return 0, fmt.Errorf("store lock epoch: %w", err)
	}
	return epoch, nil
}

// get returns the lease held under name, expired or not.
func (t *leaseTable) get(name string) (boltLock, bool) {
	l, ok := t.held[name]
	return l, ok
}

// take gives name to holder until expires with a new token, unless a
// lease of it is live at now.
func (t *leaseTable) take(name, holder string, now, expires time.Time) (boltLock, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.get(name); ok && now.Before(cur.Expires) {
		return boltLock{}, fmt.Errorf("held by %s until %s: %w", cur.Holder, cur.Expires.Format(time.RFC3339Nano), registry.ErrLocked)
	}
	if t.last+1 >= 1<<tokenEpochShift {
		return boltLock{}, fmt.Errorf("this process has handed out every fencing token of its epoch; a restart of the gateway starts a new one")
	}
	t.last++
	l := boltLock{Holder: holder, Token: t.epoch<<tokenEpochShift | t.last, Expires: expires}
	if t.held == nil {
		t.held = make(map[string]boltLock)
	}
	t.held[name] = l
	return l, nil
}

// current reports whether l is the live lease of its name at now, as
// registry.ErrLeaseLost wrapped with the reason when it is not. t.mu is
// held.
func (t *leaseTable) current(l registry.Lease, now time.Time) error {
	cur, found := t.get(l.Name)
	switch {
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

// renew moves the expiry of the live lease l to expires.
func (t *leaseTable) renew(l registry.Lease, now, expires time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.current(l, now); err != nil {
		return err
	}
	t.held[l.Name] = boltLock{Holder: l.Holder, Token: l.Token, Expires: expires}
	return nil
}

// release drops l, live or expired, when it is still the one held under
// its name. It returns registry.ErrLeaseLost (wrapped) when l was not live
// at now, and whether it dropped anything.
func (t *leaseTable) release(l registry.Lease, now time.Time) (lost error, dropped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, found := t.get(l.Name)
	lost = t.current(l, now)
	if !found || cur.Holder != l.Holder || cur.Token != l.Token {
		return lost, false
	}
	// Ours, live or expired: either way nobody else holds it.
	delete(t.held, l.Name)
	return lost, true
}

// fence checks f against the leases at now (registry.Fence.Check).
func (t *leaseTable) fence(f registry.Fence, now time.Time) error {
	if f.Lock == "" {
		return nil
	}
	t.mu.Lock()
	cur, found := t.get(f.Lock)
	t.mu.Unlock()
	return f.Check(found, cur.Token, cur.Expires, now)
}

// Lock takes the named lock for holder for ttl, with a fencing token greater
// than every token issued for name before. It returns registry.ErrLocked at once when
// a live lease exists, including one held by the same holder (locks are not
// re-entrant). An expired lease is taken over. Nothing is written to the
// file (see the top of this file).
func (b *Store) Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error) {
	if err := registry.CheckLease(name, holder, ttl); err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	var lease registry.Lease
	// A read transaction is the cheap proof that the store is open; it
	// writes nothing.
	err := b.view(ctx, func(*bbolt.Tx) error {
		now := b.clock()
		l, err := b.leases.take(name, holder, now, now.Add(ttl))
		if err != nil {
			return err
		}
		lease = registry.Lease{Name: name, Holder: holder, Token: l.Token, ExpiresAt: l.Expires}
		return nil
	})
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: lock %s: %w", name, err)
	}
	return lease, nil
}

// Renew extends a held lease to now+ttl, keeping its token; registry.ErrLeaseLost if
// it is no longer current, including when its TTL ran out.
func (b *Store) Renew(ctx context.Context, l registry.Lease, ttl time.Duration) (registry.Lease, error) {
	if ttl <= 0 {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: ttl %s is not positive", l.Name, ttl)
	}
	err := b.view(ctx, func(*bbolt.Tx) error {
		now := b.clock()
		if err := b.leases.renew(l, now, now.Add(ttl)); err != nil {
			return err
		}
		l.ExpiresAt = now.Add(ttl)
		return nil
	})
	if err != nil {
		return registry.Lease{}, fmt.Errorf("registry: renew lock %s: %w", l.Name, err)
	}
	return l, nil
}

// Unlock releases a held lease; registry.ErrLeaseLost if it is no longer current,
// including when its TTL ran out (the expired lease is then dropped if
// nobody took it over). The name's fencing tokens go on rising.
func (b *Store) Unlock(ctx context.Context, l registry.Lease) error {
	var lost error
	var dropped bool
	err := b.view(ctx, func(*bbolt.Tx) error {
		lost, dropped = b.leases.release(l, b.clock())
		return nil
	})
	if dropped {
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
