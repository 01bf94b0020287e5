package bolt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// openTestBolt opens a Bolt store at path on clk and closes it when t ends.
func openTestBolt(t *testing.T, path string, clk *registrytest.Clock) *bolt.Store {
	t.Helper()
	b, err := bolt.Open(path, bolt.Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func TestBoltConformance(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) (registry.Store, func(time.Duration)) {
		clk := registrytest.NewClock()
		return openTestBolt(t, filepath.Join(t.TempDir(), "state.db"), clk), clk.Advance
	})
}

func TestBoltCreatesParentDirs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "state.db")
	openTestBolt(t, path, registrytest.NewClock())
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatalf("stat dir: %v", err)
	}
	if perm := dir.Mode().Perm(); perm != 0o700 {
		t.Fatalf("directory mode %o, want 700", perm)
	}
	file, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat file: %v", err)
	}
	if perm := file.Mode().Perm(); perm&0o077 != 0 {
		t.Fatalf("file mode %o is readable by others", perm)
	}
}

func TestBoltSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	clk := registrytest.NewClock()
	b, err := bolt.Open(path, bolt.Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	home, err := b.PutHome(ctx, registrytest.SampleHome("h1"), registry.Cond{})
	if err != nil {
		t.Fatalf("put home: %v", err)
	}
	target, err := b.PutTarget(ctx, registry.Target{Version: "v2", Image: "img:v2", BadVersion: "v1"}, registry.Cond{})
	if err != nil {
		t.Fatalf("put target: %v", err)
	}
	lease, err := b.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	released, err := b.Lock(ctx, "home/h2", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock h2: %v", err)
	}
	if err := b.Unlock(ctx, released); err != nil {
		t.Fatalf("unlock h2: %v", err)
	}
	if err := b.ReportSessions(ctx, "gw-a", map[string]int{"h1": 2}, time.Minute); err != nil {
		t.Fatalf("report: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	r := openTestBolt(t, path, clk)
	got, err := r.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get home after reopen: %v", err)
	}
	if d := registrytest.SameHome(got, home); d != "" {
		t.Fatalf("home after reopen: %s", d)
	}
	gotTarget, err := r.GetTarget(ctx)
	if err != nil || gotTarget.Version != target.Version || gotTarget.BadVersion != "v1" || gotTarget.Generation != 1 {
		t.Fatalf("target after reopen: %+v, %v", gotTarget, err)
	}
	// Nobody else can have the file open: what the last process held or
	// reported is released at open.
	if n, err := r.FleetSessions(ctx, "h1"); err != nil || n != 0 {
		t.Fatalf("sessions after reopen: %d, %v; want those of the closed process gone", n, err)
	}
	// The lease held at close lived in memory: the file has none to release.
	if got := r.ReleasedLocks(); len(got) != 0 {
		t.Fatalf("released locks at open: %v, want none (leases are not stored)", got)
	}
	if _, err := r.Lock(ctx, "home/h3", "gw-b", time.Minute); err != nil {
		t.Fatalf("lock h3 after reopen: %v", err)
	}
	err = r.Unlock(ctx, lease)
	registrytest.WantErr(t, "unlock of a lease from before reopen", err, registry.ErrLeaseLost)
	for _, l := range []registry.Lease{lease, released} {
		again, err := r.Lock(ctx, l.Name, "gw-b", time.Minute)
		if err != nil {
			t.Fatalf("lock %s after reopen: %v", l.Name, err)
		}
		if again.Token <= l.Token {
			t.Fatalf("%s token after reopen %d, not above %d", l.Name, again.Token, l.Token)
		}
	}
}

// TestBoltLeasesWriteNothing: taking, renewing and releasing a lease
// commits no transaction to the file, while the write fenced by it still
// checks it in its own transaction, and a lease from before a restart
// admits no write after it.
func TestBoltLeasesWriteNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	clk := registrytest.NewClock()
	b := openTestBolt(t, path, clk)
	home, err := b.PutHome(ctx, registrytest.SampleHome("h1"), registry.Cond{})
	if err != nil {
		t.Fatalf("put home: %v", err)
	}
	before := testbin.BoltTxID(t, path)
	var last registry.Lease
	for i := range 50 {
		l, err := b.Lock(ctx, "home/h1", "gw-a", time.Minute)
		if err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		if l.Token <= last.Token {
			t.Fatalf("lock %d: token %d, not above %d", i, l.Token, last.Token)
		}
		if l, err = b.Renew(ctx, l, 2*time.Minute); err != nil {
			t.Fatalf("renew %d: %v", i, err)
		}
		if err := b.Unlock(ctx, l); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		last = l
	}
	if after := testbin.BoltTxID(t, path); after != before {
		t.Fatalf("50 locks, renewals and releases committed %d transactions, want none", after-before)
	}

	// A fenced write is checked against the lease in memory.
	l, err := b.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	home.Status = registry.StatusWaking
	if home, err = b.PutHome(ctx, home, registry.Cond{Generation: home.Generation, Owner: home.Owner}.Fenced(l)); err != nil {
		t.Fatalf("write fenced by the live lease: %v", err)
	}
	clk.Advance(2 * time.Minute)
	_, err = b.PutHome(ctx, home, registry.Cond{Generation: home.Generation, Owner: home.Owner}.Fenced(l))
	registrytest.WantErr(t, "write fenced by an expired lease", err, registry.ErrLeaseLost)
	taken, err := b.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("take over the expired lease: %v", err)
	}
	_, err = b.PutHome(ctx, home, registry.Cond{Generation: home.Generation, Owner: home.Owner}.Fenced(l))
	registrytest.WantErr(t, "write fenced by a lease taken over", err, registry.ErrLeaseLost)
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := b.Lock(ctx, "home/h2", "gw-a", time.Minute); err == nil {
		t.Fatal("lock on a closed store succeeded")
	}

	// After a restart the old lease admits nothing, and tokens go on rising.
	r := openTestBolt(t, path, clk)
	_, err = r.PutHome(ctx, home, registry.Cond{Generation: home.Generation, Owner: home.Owner}.Fenced(taken))
	registrytest.WantErr(t, "write fenced by a lease from before the restart", err, registry.ErrLeaseLost)
	again, err := r.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock after reopen: %v", err)
	}
	if again.Token <= taken.Token {
		t.Fatalf("token after reopen %d, not above %d", again.Token, taken.Token)
	}
}

// TestBoltLeasesOfAnOlderFile: a file whose gateway stored its leases (a
// lock left held, and fencing sequences per name) has them released at
// open, and the next tokens are above the stored ones.
func TestBoltLeasesOfAnOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	clk := registrytest.NewClock()
	b := openTestBolt(t, path, clk)
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("open the file with bbolt: %v", err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket([]byte("locks")).Put([]byte("home/h1"),
			[]byte(`{"holder":"gw-old","token":57,"expires":"2099-01-01T00:00:00Z"}`)); err != nil {
			return err
		}
		return tx.Bucket([]byte("lockseq")).Put([]byte("home/h1"), []byte{0, 0, 0, 0, 0, 0, 0, 57})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("store an older gateway's lease: %v", err)
	}
	r := openTestBolt(t, path, clk)
	if got := r.ReleasedLocks(); len(got) != 1 || got[0] != "home/h1" {
		t.Fatalf("released locks at open: %v, want [home/h1]", got)
	}
	l, err := r.Lock(ctx, "home/h1", "gw-new", time.Minute)
	if err != nil {
		t.Fatalf("lock after the older gateway: %v", err)
	}
	if l.Token <= 57 {
		t.Fatalf("token %d, not above the stored 57", l.Token)
	}
}

// TestBoltLeftOpenBy: a store closed cleanly says nothing at the next
// open; one whose holder ended without closing it (its pid file left, as
// after a SIGKILL) names that pid.
func TestBoltLeftOpenBy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	clk := registrytest.NewClock()
	b, err := bolt.Open(path, bolt.Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if got := b.LeftOpenBy(); got != 0 {
		t.Fatalf("new store left open by %d, want 0", got)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b, err = bolt.Open(path, bolt.Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got := b.LeftOpenBy(); got != 0 {
		t.Fatalf("after a clean close: left open by %d, want 0", got)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// What a holder killed before Close leaves behind.
	if err := os.WriteFile(path+".pid", []byte("4194301\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := openTestBolt(t, path, clk)
	if got := r.LeftOpenBy(); got != 4194301 {
		t.Fatalf("after a holder that did not close: left open by %d, want 4194301", got)
	}
}

func TestBoltSecondOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	first, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	second, err := bolt.Open(path, bolt.Options{})
	if err == nil {
		_ = second.Close()
		t.Fatal("second open of a held file succeeded")
	}
	var oe *bolt.OpenError
	if !errors.Is(err, bolterrors.ErrTimeout) || !errors.As(err, &oe) || oe.Problem != bolt.ProblemInUse ||
		oe.PID != os.Getpid() || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v; want in use by pid %d, naming %s", err, os.Getpid(), path)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	third := openTestBolt(t, path, registrytest.NewClock())
	if _, err := third.ListHomes(context.Background()); err != nil {
		t.Fatalf("list after the file was freed: %v", err)
	}
}

func TestBoltClosed(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err = b.GetHome(context.Background(), "h1")
	if err == nil || errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("get on a closed store: %v; want an error other than not found", err)
	}
}

func TestBoltCorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	raw, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("open raw: %v", err)
	}
	err = raw.Update(func(tx *bbolt.Tx) error {
		// "homes" is the bucket of home records in bbolt.go.
		return tx.Bucket([]byte("homes")).Put([]byte("h1"), []byte("{not json"))
	})
	if cerr := raw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("write corrupt record: %v", err)
	}

	// A record that does not decode keeps the store from opening, named
	// with the way to drop it, rather than failing every later read.
	_, err = bolt.Open(path, bolt.Options{})
	var oe *bolt.OpenError
	if !errors.As(err, &oe) || oe.Problem != bolt.ProblemBadRecord || !slices.Equal(oe.Records, []string{"homes/h1"}) {
		t.Fatalf("open with a corrupt home: %v; want the record homes/h1 named", err)
	}
}

func TestBoltDefaultClock(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	before := time.Now()
	l, err := b.Lock(context.Background(), "home/h1", "gw-a", time.Hour)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	// The lease runs on the wall clock: an hour from about now.
	if l.ExpiresAt.Before(before.Add(59 * time.Minute)) {
		t.Fatalf("lease expires %v, want about an hour after %v", l.ExpiresAt, before)
	}
}

func TestBoltUnavailable(t *testing.T) {
	registrytest.RunUnavailable(t, func(t *testing.T) (registry.Store, func(), func()) {
		b, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b, func() { _ = b.Close() }, nil
	})
}
