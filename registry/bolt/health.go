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
	"golang.org/x/sys/unix"

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
// failed on the disk, or CheckDisk found the disk read-only or full (cause,
// since when), or neither happened since the last probe passed. A failure
// sticks until ProbeWrite passes: on a full disk a small write may still
// fit in the file's free pages while any write that needs the file to grow
// fails, so one write that passes proves nothing. Only a write that reached
// the disk, or the disk's own flags and counters, set it: a conflict or a
// closed store says nothing about the disk.
type writeHealth struct {
	mu    sync.Mutex
	cause error     // the first disk failure since the last probe passed; nil when none
	since time.Time // when cause was seen

	// file is the store file opened for writing once more, for CheckDisk's
	// empty write; nil when it could not be opened. Set at Open, closed
	// at Close.
	file *os.File
}

// note records the outcome of one write transaction, or a failure
// CheckDisk found.
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

// Growth bounds of the free space the disk checks ask for: bbolt grows a
// small file by its own size, a large one by its AllocSize (16 MiB by
// default).
const (
	probeMinFree = 64 << 10
	probeMaxFree = 16 << 20
)

// CheckDisk looks at the store's disk without writing to it, in two system
// calls that need no disk I/O (microseconds):
//   - statfs(2) of the file's directory: a filesystem mounted read-only,
//     or with less room than the file's next growth (at least 64 KiB, at
//     most 16 MiB, in the blocks available to unprivileged users), is
//     unwritable;
//   - a write of zero bytes to the file: it transfers nothing, changes no
//     time stamp and reaches no disk, but passes the filesystem's own write
//     checks, which statfs does not show: ext4 after an error with
//     errors=remount-ro (its "emergency_ro", read-only under every open
//     file while the mount's flags still say rw) answers EROFS, a
//     filesystem shut down after I/O errors (xfs) answers EIO.
//
// What it finds marks the store unwritable as a failed write does, and
// CheckDisk returns it. Called every second by the gateway's store watch,
// it finds a read-only remount or a full disk within that second while the
// gateway is idle, when no write would (the embedded store writes only
// when something happens). A quota it does not see: the next write does.
// It never clears a failure: only a write proves that the disk takes
// writes again (ProbeWrite).
func (b *Store) CheckDisk() error {
	err := diskRoom(b.db.Path())
	if err == nil {
		err = emptyWrite(b.health.file)
	}
	if err != nil {
		b.health.note(err)
		return &unwritableErr{err: err}
	}
	return nil
}

// openForCheck opens the store file at path for writing, for CheckDisk's
// empty write; nil when it cannot (CheckDisk then relies on statfs).
func openForCheck(path string) *os.File {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

// emptyWrite writes zero bytes at offset 0 of f (os.File skips the system
// call for an empty write, so it is made here): the filesystem's answer to
// a write, with nothing written. A closed or missing f proves nothing.
func emptyWrite(f *os.File) error {
	if f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var werr error
	if err := rc.Control(func(fd uintptr) { _, werr = unix.Pwrite(int(fd), nil, 0) }); err != nil {
		return nil // closed by Close meanwhile
	}
	if werr != nil {
		return fmt.Errorf("the store's disk refuses writes: %w", werr)
	}
	return nil
}

// diskRoom says why the disk of the store file at path cannot take the
// file's next growth (read-only, or too little free space), wrapping
// syscall.EROFS or syscall.ENOSPC; nil when it can, or when the disk
// cannot be looked at (the next write will tell).
func diskRoom(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return nil
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("the store's disk is mounted read-only: %w", syscall.EROFS)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	need := min(max(fi.Size(), probeMinFree), probeMaxFree)
	if free := int64(st.Bavail) * st.Bsize; free < need {
		return fmt.Errorf("%d bytes free on the store's disk, less than the %d its next growth needs: %w", free, need, syscall.ENOSPC)
	}
	return nil
}

// ProbeWrite tries whether the store's disk takes writes again: the disk
// must not be read-only and have as much free space as the file's next
// growth (diskRoom), then one small write (a timestamp under meta/probe)
// must pass, synced to disk like every commit. When both pass, Unwritable
// turns nil. It is meant for while a failure is known: it writes state.db.
func (b *Store) ProbeWrite(ctx context.Context) error {
	if err := diskRoom(b.db.Path()); err != nil {
		return &unwritableErr{err: err}
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
