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
	if got := r.ReleasedLocks(); len(got) != 1 || got[0] != "home/h1" {
		t.Fatalf("released locks at open: %v, want [home/h1]", got)
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
