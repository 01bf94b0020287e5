package registry

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/fault"
)

// ErrUnwritable means the store cannot write: its disk is read-only, full,
// over quota, or failing with I/O errors. Nothing was written. Reads go
// on. It is also ErrUnavailable (errors.Is answers true for both), so a
// caller that serves from what it knows while a store is down does the
// same here; one that needs a write fails fast, without a retry loop.
var ErrUnwritable = fault.NewSentinel("registry: store unwritable", fault.Unavailable, "store_unavailable",
	"the gateway cannot write its state; nothing was changed").
	Hinted("the store's disk is read-only, full or failing: free space or remount it read-write; " +
		"the gateway notices by itself (a small write is tried every second) and /readyz answers 200 again")

// unwritableErr is a write that failed on the disk: it is ErrUnwritable
// and ErrUnavailable, and unwraps to the disk's error too.
type unwritableErr struct{ err error }

func (e *unwritableErr) Error() string {
	return fmt.Sprintf("the store file cannot be written: %v", e.err)
}

func (e *unwritableErr) Unwrap() []error { return []error{e.err, ErrUnwritable, ErrUnavailable} }

// diskFailure reports whether err is the disk refusing a write (as
// opposed to a conflict, a missing record or a closed store).
func diskFailure(err error) bool {
	for _, no := range []syscall.Errno{syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EFBIG} {
		if errors.Is(err, no) {
			return true
		}
	}
	return errors.Is(err, fs.ErrPermission) // a file made read-only under the gateway
}

// writeHealth is what a Bolt store knows about its disk's writes: the last
// one failed (cause, since when) or not. Only a write that reached the disk
// changes it: a conflict or a closed store says nothing about the disk.
type writeHealth struct {
	mu    sync.Mutex
	cause error     // the last disk failure; nil when the last write passed
	since time.Time // when cause was first seen
}

// note records the outcome of one write transaction.
func (h *writeHealth) note(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.cause = nil
	case diskFailure(err):
		if h.cause == nil {
			h.since = time.Now()
		}
		h.cause = err
	}
}

// Unwritable says why the store's last write failed on its disk (wrapping
// ErrUnwritable) and since when, or nil while writes pass. It turns nil
// again at the next write that passes (ProbeWrite makes one).
func (b *Bolt) Unwritable() (time.Time, error) {
	b.health.mu.Lock()
	defer b.health.mu.Unlock()
	if b.health.cause == nil {
		return time.Time{}, nil
	}
	return b.health.since, &unwritableErr{err: b.health.cause}
}

// ProbeWrite makes one small write (a timestamp under the meta bucket's
// probe key), synced to disk like every commit, so a store found
// unwritable learns when its disk takes writes again.
func (b *Bolt) ProbeWrite(ctx context.Context) error {
	return b.update(ctx, func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return bk.Put(keyProbe, []byte(b.clock().UTC().Format(time.RFC3339Nano)))
	})
}

// WriteHealth is a store whose own disk can refuse writes (the embedded
// store): Unwritable says why, and since when; ProbeWrite tries a small
// write.
type WriteHealth interface {
	Unwritable() (time.Time, error)
	ProbeWrite(ctx context.Context) error
}

var _ WriteHealth = (*Bolt)(nil)
