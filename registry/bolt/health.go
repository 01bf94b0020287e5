package bolt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// unwritableErr is a write that failed on the disk: it is registry.ErrUnwritable
// and registry.ErrUnavailable, and unwraps to the disk's error too.
type unwritableErr struct{ err error }

func (e *unwritableErr) Error() string {
	return fmt.Sprintf("the store file cannot be written: %v", e.err)
}

func (e *unwritableErr) Unwrap() []error {
	return []error{e.err, registry.ErrUnwritable, registry.ErrUnavailable}
}

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

// writeHealth is what a Store store knows about its disk's writes: a write
// failed on the disk (cause, since when), or none did since the last probe
// passed. A failure sticks until ProbeWrite passes: on a full disk a small
// write may still fit in the file's free pages while any write that needs
// the file to grow fails, so one write that passes proves nothing. Only a
// write that reached the disk sets it: a conflict or a closed store says
// nothing about the disk.
type writeHealth struct {
	mu    sync.Mutex
	cause error     // the first disk failure since the last probe passed; nil when none
	since time.Time // when cause was seen
}

// note records the outcome of one write transaction.
func (h *writeHealth) note(err error) {
	if !diskFailure(err) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause == nil {
		h.cause, h.since = err, time.Now()
	}
}

// clear records a probe that passed.
func (h *writeHealth) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cause = nil
}

// Unwritable says why a write of the store failed on its disk (wrapping
// registry.ErrUnwritable) and since when, or nil while none did since the last
// probe passed (ProbeWrite).
func (b *Store) Unwritable() (time.Time, error) {
	b.health.mu.Lock()
	defer b.health.mu.Unlock()
	if b.health.cause == nil {
		return time.Time{}, nil
	}
	return b.health.since, &unwritableErr{err: b.health.cause}
}

// Growth bounds of the free space ProbeWrite asks for: bbolt grows a small
// file by its own size, a large one by its AllocSize (16 MiB by default).
const (
	probeMinFree = 64 << 10
	probeMaxFree = 16 << 20
)

// ProbeWrite tries whether the store's disk takes writes again: it needs
// as much free space as the file's next growth (at least 64 KiB, at most
// 16 MiB), then one small write (a timestamp under meta/probe), synced to
// disk like every commit. When both pass, Unwritable turns nil.
func (b *Store) ProbeWrite(ctx context.Context) error {
	path := b.db.Path()
	if fi, err := os.Stat(path); err == nil {
		need := min(max(fi.Size(), probeMinFree), probeMaxFree)
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Dir(path), &st); err == nil {
			if free := int64(st.Bavail) * st.Bsize; free < need {
				err := fmt.Errorf("%d bytes free on the store's disk, less than the %d its next growth needs: %w", free, need, syscall.ENOSPC)
				return &unwritableErr{err: err}
			}
		}
	}
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return bk.Put(keyProbe, []byte(b.clock().UTC().Format(time.RFC3339Nano)))
	})
	if err == nil {
		b.health.clear()
	}
	return err
}

var _ registry.WriteHealth = (*Store)(nil)
