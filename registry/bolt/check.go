package bolt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Report is what Check found in a store file.
type Report struct {
	// Path and Size are the file's.
	Path string
	Size int64
	// Records counts the records of each bucket, by bucket name.
	Records map[string]int
	// Problems lists every problem found, one sentence each; none means
	// the file is sound.
	Problems []string
}

// Buckets returns the bucket names of the report, sorted.
func (r Report) Buckets() []string {
	names := make([]string, 0, len(r.Records))
	for n := range r.Records {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkRecord decodes and checks one stored value of a bucket; known is
// false for a bucket that is not one of the store's.
func checkRecord(bucket string, k, raw []byte) (known bool, err error) {
	switch bucket {
	case string(bucketHomes):
		err = checkKeyed(raw, k, "id", func(h *registry.Home) string { return h.ID }, (*registry.Home).Validate)
	case string(bucketApps):
		err = checkKeyed(raw, k, "slug", func(a *registry.App) string { return a.Slug }, nil)
	case string(bucketAppStates):
		err = checkKeyed(raw, k, "slug", func(s *registry.AppState) string { return s.Slug }, (*registry.AppState).Validate)
	case string(bucketClaims):
		err = checkKeyed(raw, k, "target", func(c *registry.Claim) string { return c.Target }, nil)
	case string(bucketTarget):
		if string(k) != string(keyTarget) {
			return true, errors.New("unknown key")
		}
		_, err = decodeAs[registry.Target](raw)
	case string(bucketLocks):
		_, err = decodeAs[boltLock](raw)
	case string(bucketSessions):
		_, err = decodeAs[boltSessions](raw)
	case string(bucketMeta):
		switch string(k) {
		case string(keySchema):
			if v, cerr := strconv.Atoi(string(raw)); cerr != nil || v < 1 {
				err = fmt.Errorf("%q is not a format version", raw)
			}
		case string(keyProbe):
		default:
			err = errors.New("unknown key")
		}
	case string(bucketLockSeq):
		if len(raw) != 8 {
			err = fmt.Errorf("fencing token of %d bytes, want 8", len(raw))
		}
	default:
		return false, nil
	}
	return true, err
}

// checkKeyed decodes raw as a record whose key field (named field) must be
// k, and holds it to valid, if given.
func checkKeyed[T any](raw, k []byte, field string, key func(*T) string, valid func(*T) error) error {
	v, err := decodeAs[T](raw)
	switch {
	case err != nil:
		return err
	case key(&v) != string(k):
		return fmt.Errorf("record %s %q differs from its key", field, key(&v))
	case valid != nil:
		return valid(&v)
	}
	return nil
}

// decodeAs decodes one JSON record.
func decodeAs[T any](raw []byte) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode: %w", err)
	}
	return v, nil
}

// Check opens the store file at path read-only (it writes nothing,
// and fails with ProblemInUse while a gateway holds the file), checks
// every page, then reads and checks every record of every bucket. A file
// that cannot be opened is an *OpenError; problems found inside an opened
// file are listed in the report.
func Check(path string) (Report, error) {
	r := Report{Path: path, Records: map[string]int{}}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return r, &OpenError{Path: path, Problem: ProblemMissing}
	case err != nil:
		return r, fmt.Errorf("registry: check %s: %w", path, err)
	case fi.Size() == 0:
		return r, &OpenError{Path: path, Problem: ProblemEmpty}
	}
	r.Size = fi.Size()
	db, err := openBoltFile(path, true)
	if err != nil {
		return r, err
	}
	defer func() { _ = db.Close() }()
	if err := checkPages(db); err != nil {
		r.Problems = append(r.Problems, err.Error())
		return r, nil
	}
	err = guardBolt(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
				r.checkBucket(string(name), b)
				return nil
			})
		})
	})
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	return r, nil
}

// checkBucket counts and checks the records of one bucket.
func (r *Report) checkBucket(name string, b *bbolt.Bucket) {
	r.Records[name] = 0
	known := true
	_ = b.ForEach(func(k, v []byte) error {
		r.Records[name]++
		if v == nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s/%s: a nested bucket where a record belongs", name, k))
			return nil
		}
		var err error
		if known, err = checkRecord(name, k, v); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s/%s: %v", name, k, err))
		}
		return nil
	})
	if !known {
		r.Problems = append(r.Problems, fmt.Sprintf("bucket %q: not a bucket of wakegate's store", name))
	}
}

// Backup writes a consistent copy of the store to w, from one read
// transaction, while the store stays open for reads and writes. size, when
// not nil, is told the copy's size before the first byte is written. It
// returns the bytes written.
func (b *Store) Backup(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := b.db.View(func(tx *bbolt.Tx) error {
		if size != nil {
			size(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("registry: backup %s: %w", b.db.Path(), err)
	}
	return n, nil
}

// BackupFile copies the store file at path, which no process may hold for
// writing (a running gateway backs up through Store.Backup), to dst: the
// file is opened read-only and checked, the copy is written to a temp file
// next to dst, synced, and renamed onto dst. It returns the bytes written.
func BackupFile(path, dst string) (int64, error) {
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		if err == nil {
			return 0, &OpenError{Path: path, Problem: ProblemEmpty}
		}
		return 0, &OpenError{Path: path, Problem: ProblemMissing, Err: err}
	}
	db, err := openBoltFile(path, true)
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	if err := checkPages(db); err != nil {
		return 0, &OpenError{Path: path, Problem: ProblemDamaged, Err: err}
	}
	return WriteFileAtomic(dst, copyOf(db))
}

// copyOf writes a consistent copy of db, read in one transaction.
func copyOf(db *bbolt.DB) func(w io.Writer) (int64, error) {
	return func(w io.Writer) (int64, error) {
		var n int64
		err := db.View(func(tx *bbolt.Tx) error {
			var err error
			n, err = tx.WriteTo(w)
			return err
		})
		return n, err
	}
}

// WriteFileAtomic writes dst through write: into a temp file in dst's
// directory, synced, then renamed onto dst, so dst is either the old file
// or the whole new one. It returns the bytes written.
func WriteFileAtomic(dst string, write func(io.Writer) (int64, error)) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", dst, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	n, err := write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", dst, err)
	}
	return n, nil
}

// DropRecords deletes the records named by refs (bucket/key, as an
// OpenError or a check names them) from the store file at path, in one
// transaction, so a store holding records that cannot be read opens again.
// No process may hold the file (it fails with ProblemInUse while a
// gateway does), and its pages must be sound: a damaged file is refused
// (ProblemDamaged) and left as it is. A ref naming no record, or a bucket
// that is not one of the store's, fails before anything is deleted.
func DropRecords(path string, refs []string) error {
	if len(refs) == 0 {
		return errors.New("registry: drop records: no record named")
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &OpenError{Path: path, Problem: ProblemMissing}
	case err != nil:
		return fmt.Errorf("registry: drop records in %s: %w", path, err)
	case fi.Size() == 0:
		return &OpenError{Path: path, Problem: ProblemEmpty}
	}
	db, err := openBoltFile(path, false)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if err := checkPages(db); err != nil {
		return &OpenError{Path: path, Problem: ProblemDamaged, Err: err}
	}
	return guardBolt(func() error {
		return db.Update(func(tx *bbolt.Tx) error {
			for _, ref := range refs {
				bucket, key, ok := strings.Cut(ref, "/")
				if !ok || bucket == "" || key == "" {
					return fmt.Errorf("registry: drop %q: name a record as bucket/key (homes/h1)", ref)
				}
				if known, _ := checkRecord(bucket, []byte(key), nil); !known {
					return fmt.Errorf("registry: drop %s: %q is not a bucket of wakegate's store", ref, bucket)
				}
				bk := tx.Bucket([]byte(bucket))
				if bk == nil || bk.Get([]byte(key)) == nil {
					return fmt.Errorf("registry: drop %s: no such record in %s", ref, path)
				}
				if err := bk.Delete([]byte(key)); err != nil {
					return fmt.Errorf("registry: drop %s: %w", ref, err)
				}
			}
			return nil
		})
	})
}
