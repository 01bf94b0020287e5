package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/wakegate/wakegate/registry"
)

// Opening a bbolt store is where a damaged disk shows first, so it is done
// in steps that never write to a file that has not been proven sound:
//
//  1. Only an absent file becomes a new, empty store, and only when the
//     caller does not say the store must hold data (Options.MustHoldData).
//     An empty (0-byte) file is always refused: bbolt never leaves one
//     behind, so something emptied it, and starting on it would forget
//     every stored home and the roll target.
//  2. An existing file is opened read-only and checked: bbolt's own page
//     check, a size that covers every page the meta page counts, and a
//     decode of every record. bbolt panics (or faults on its memory map) on
//     some damage; both are turned into an error here. A record that does
//     not decode is named (bucket/key) with the command that drops it. A
//     file held by another process is "in use".
//  3. Only then is it opened for writing, which holds bbolt's exclusive
//     file lock for as long as the store is open, and what the previous
//     process left behind is cleared (see clearDead).
//  4. The process id is written next to the file (path + ".pid"), so a
//     second gateway refused the lock can say which process holds it.

// OpenProblem is what kept a bbolt store from opening.
type OpenProblem string

// Open problems.
const (
	ProblemDamaged OpenProblem = "damaged" // the file is not a sound bbolt file
	ProblemInUse   OpenProblem = "in use"  // another process holds its lock
	ProblemEmpty   OpenProblem = "empty"   // 0 bytes where data was expected
	ProblemMissing OpenProblem = "missing" // no file where data was expected
	// ProblemBadRecord: the pages are sound but records do not decode.
	ProblemBadRecord OpenProblem = "holding records that cannot be read"
)

// OpenError is why Open refused a store, for the operator: the file,
// the problem, the process that holds it (for ProblemInUse, when known) and
// the underlying cause. Hint says what to do.
type OpenError struct {
	Path    string
	Problem OpenProblem
	// PID is the process holding the store (ProblemInUse), 0 when unknown.
	PID int
	// Why adds the caller's reason for ProblemEmpty and ProblemMissing
	// (Options.MustHoldData).
	Why string
	// Records names the records that do not decode (ProblemBadRecord), as
	// bucket/key ("homes/h1").
	Records []string
	Err     error
}

// Error names the file and the problem.
func (e *OpenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s is %s", e.Path, e.Problem)
	switch {
	case e.Problem == ProblemInUse && e.PID > 0:
		fmt.Fprintf(&b, " by another gateway (pid %d)", e.PID)
	case e.Problem == ProblemInUse:
		b.WriteString(" by another gateway (pid unknown)")
	case e.Why != "":
		fmt.Fprintf(&b, ", but %s: starting would forget every stored home and the roll target", e.Why)
	case e.Problem == ProblemEmpty:
		b.WriteString(" (0 bytes; a store is never left empty, so something emptied it): " +
			"starting on it would forget every stored home and the roll target")
	case e.Problem == ProblemBadRecord:
		fmt.Fprintf(&b, " (%s)", strings.Join(e.Records, ", "))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *OpenError) Unwrap() error { return e.Err }

// Hint says what the operator can do about the problem.
func (e *OpenError) Hint() string {
	switch e.Problem {
	case ProblemNewer:
		return "run the newer wakegate that wrote it, or restore a backup this version wrote " +
			"(a migration leaves one next to the file: state.db.vN.bak)"
	case ProblemInUse:
		return "one data_dir serves one gateway: stop the other gateway first, or give this one another data_dir"
	case ProblemDamaged:
		return fmt.Sprintf("keep the file as it is; restore the last backup over it (wakegate store backup makes one; docs/store.md, \"Restoring the store\"), "+
			"or start with wakegate serve --reset-store, which moves the file aside and begins with an empty store; "+
			"wakegate store check --file %s shows what is wrong", e.Path)
	case ProblemBadRecord:
		return fmt.Sprintf("drop the records that cannot be read with the gateway stopped: wakegate store drop --file %s %s "+
			"(a home or app of the config is registered again at start; one registered through the admin API must be registered again), "+
			"or restore the last backup over the file (docs/store.md, \"Restoring the store\"); "+
			"wakegate store check --file %s lists every problem", e.Path, strings.Join(e.Records, " "), e.Path)
	case ProblemEmpty:
		return fmt.Sprintf("restore the last backup to %s (wakegate store backup makes one; docs/store.md, \"Restoring the store\"), "+
			"or start with wakegate serve --reset-store, which moves the empty file aside and begins with an empty store", e.Path)
	default:
		return fmt.Sprintf("restore the last backup to %s (docs/store.md, \"Restoring the store\"), "+
			"or start with wakegate serve --reset-store to begin with an empty store", e.Path)
	}
}

// Open opens (creating if needed) the bbolt file at path, creating its
// parent directories with mode 0700 and the file with mode 0600, in the
// steps written above. It returns an *OpenError when the file is damaged,
// holds records that do not decode, is held by another process (after
// waiting about a second), is empty, or is missing while opts.MustHoldData
// says it should hold data.
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("registry: open bolt store: path is empty")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("registry: open bolt store %s: create directory: %w", path, err)
	}
	migrated := Migrated{From: Schema}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && opts.MustHoldData != "":
		return nil, &OpenError{Path: path, Problem: ProblemMissing, Why: opts.MustHoldData}
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("registry: open bolt store %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("registry: open bolt store %s: not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() == 0:
		return nil, &OpenError{Path: path, Problem: ProblemEmpty, Why: opts.MustHoldData}
	default:
		if migrated, err = verifyBolt(path); err != nil {
			return nil, err
		}
	}
	db, err := openBoltFile(path, false)
	if err != nil {
		return nil, err
	}
	b := &Store{db: db, now: opts.Now, migrated: migrated, commits: committer{db: db}}
	b.Typed = registry.Typed{Tables: b}
	if b.now == nil {
		b.now = time.Now
	}
	if err := b.prepare(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("registry: open bolt store %s: %w", path, err)
	}
	b.health.file = openForCheck(path)
	b.leftBy = recordedPID(path)
	writePIDFile(path)
	return b, nil
}

// openBoltFile opens path with bbolt, read-only or for writing, turning a
// lock held elsewhere into ProblemInUse and any other failure (a panic of
// bbolt's included) into ProblemDamaged.
func openBoltFile(path string, readOnly bool) (*bbolt.DB, error) {
	var db *bbolt.DB
	err := guardBolt(func() error {
		var err error
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: boltLockTimeout, ReadOnly: readOnly})
		return err
	})
	var pathErr *os.PathError
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, &OpenError{Path: path, Problem: ProblemInUse, PID: readPIDFile(path),
			Err: fmt.Errorf("its file lock is held (waited %s): %w", boltLockTimeout, err)}
	case errors.As(err, &pathErr):
		// The file could not be opened at all (permissions, a directory
		// in its place): nothing says its content is damaged.
		return nil, fmt.Errorf("registry: open bolt store %s: %w", path, err)
	case err != nil:
		return nil, &OpenError{Path: path, Problem: ProblemDamaged, Err: err}
	}
	return db, nil
}

// verifyBolt opens the existing file at path read-only and checks every
// page, the format version and every record of it (step 2). A file of an
// older format is copied next to itself before anything migrates it
// (schema.go).
func verifyBolt(path string) (Migrated, error) {
	m := Migrated{From: Schema}
	db, err := openBoltFile(path, true)
	if err != nil {
		return m, err
	}
	defer func() { _ = db.Close() }()
	if err := checkPages(db); err != nil {
		return m, &OpenError{Path: path, Problem: ProblemDamaged, Err: err}
	}
	if m.From, err = checkSchema(path, db); err != nil {
		return m, err
	}
	var bad []string
	var first error
	err = guardBolt(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
				return bk.ForEach(func(k, v []byte) error {
					if v == nil {
						return nil
					}
					if _, err := checkRecord(string(name), k, v); err != nil {
						bad = append(bad, string(name)+"/"+string(k))
						if first == nil {
							first = fmt.Errorf("%s/%s: %w", name, k, err)
						}
					}
					return nil
				})
			})
		})
	})
	if err != nil {
		return m, &OpenError{Path: path, Problem: ProblemDamaged, Err: err}
	}
	if len(bad) > 0 {
		return m, &OpenError{Path: path, Problem: ProblemBadRecord, Records: bad, Err: first}
	}
	if m.From < Schema {
		if m.Backup, err = backupBeforeMigration(path, db, m.From); err != nil {
			return m, fmt.Errorf("registry: open bolt store %s: %w", path, err)
		}
	}
	return m, nil
}

// checkPages runs bbolt's consistency check over db and compares the size
// its meta page claims with the file's, reporting the first problem.
func checkPages(db *bbolt.DB) error {
	fi, err := os.Stat(db.Path())
	if err != nil {
		return err
	}
	return guardBolt(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			if tx.Size() > fi.Size() {
				return fmt.Errorf("the file is %d bytes, shorter than the %d its pages need (truncated)", fi.Size(), tx.Size())
			}
			var problems []string
			for err := range tx.Check() {
				problems = append(problems, err.Error())
			}
			if len(problems) > 0 {
				return fmt.Errorf("%d page problems, the first: %s", len(problems), problems[0])
			}
			return nil
		})
	})
}

// guardBolt runs fn, which calls into bbolt, turning a panic (bbolt panics
// on some damaged pages) or a memory fault on its map (a file shorter than
// its pages) into an error.
func guardBolt(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt: %v", r)
		}
	}()
	return fn()
}

// prepare creates the buckets a store needs and clears what a dead process
// left (step 3).
func (b *Store) prepare() error {
	return guardBolt(func() error {
		return b.db.Update(func(tx *bbolt.Tx) error {
			for _, name := range [][]byte{bucketHomes, bucketApps, bucketAppStates, bucketTarget, bucketLocks, bucketLockSeq, bucketSessions} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return fmt.Errorf("create bucket %s: %w", name, err)
				}
			}
			v, err := schemaOf(tx)
			if err != nil {
				return err
			}
			if v < Schema {
				if err := migrateBolt(tx, v); err != nil {
					return err
				}
			}
			if b.released, err = clearDead(tx); err != nil {
				return err
			}
			b.leases.epoch, err = raiseEpoch(tx)
			return err
		})
	})
}

// clearDead deletes every lifecycle lock and session report stored in tx
// and returns the names of the locks. With the file lock held no other
// process has the store open, so whoever holds a stored lease or reported
// sessions is a process that ended without releasing them (a crash, a
// SIGKILL): waiting for their leases to expire would only hold the homes
// back. This gateway keeps its leases in memory (leases.go), so only a
// file an older gateway wrote holds any. Fencing tokens are kept, so a
// new lease is still newer than any before it.
func clearDead(tx *bbolt.Tx) ([]string, error) {
	var names []string
	for _, bucket := range [][]byte{bucketLocks, bucketSessions} {
		bk := tx.Bucket(bucket)
		var keys [][]byte
		if err := bk.ForEach(func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}); err != nil {
			return nil, err
		}
		for _, k := range keys {
			if err := bk.Delete(k); err != nil {
				return nil, fmt.Errorf("clear %s %s: %w", bucket, k, err)
			}
			if string(bucket) == string(bucketLocks) {
				names = append(names, string(k))
			}
		}
	}
	return names, nil
}

// pidFile is where the process holding the store at path says who it is.
func pidFile(path string) string { return path + ".pid" }

// writePIDFile records this process as the store's holder. It is a
// courtesy to the next process refused the lock (which then says "pid
// unknown" without it), so a failed write is not an error.
func writePIDFile(path string) {
	_ = os.WriteFile(pidFile(path), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

// readPIDFile returns the pid recorded next to path when that process is
// alive, else 0.
func readPIDFile(path string) int {
	pid := recordedPID(path)
	if pid == 0 {
		return 0
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	return pid
}

// recordedPID returns the pid the pid file next to path names, alive or
// not; 0 for none. With the file lock held, a pid file there was left by a
// process that ended without closing the store.
func recordedPID(path string) int {
	raw, err := os.ReadFile(pidFile(path))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// removePIDFile removes the pid file if it still names this process.
func removePIDFile(path string) {
	if raw, err := os.ReadFile(pidFile(path)); err == nil && strings.TrimSpace(string(raw)) == strconv.Itoa(os.Getpid()) {
		_ = os.Remove(pidFile(path))
	}
}
