package bolt_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestBoltIdleWritesNothing: what an idle gateway does every second (its
// session report, the fleet's count of a home's sessions, a look at the
// disk) commits nothing to the file, while a change of a record still
// does. The file's transaction id counts the commits.
func TestBoltIdleWritesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	clk := registrytest.NewClock()
	b := openTestBolt(t, path, clk)
	h, err := b.PutHome(ctx, registrytest.SampleHome("h1"), registry.Cond{})
	if err != nil {
		t.Fatalf("put home: %v", err)
	}
	before := testbin.BoltTxID(t, path)
	fi0, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := b.ReportSessions(ctx, "gw-a", map[string]int{"h1": i % 3}, 3*time.Second); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		if err := b.CheckDisk(); err != nil {
			t.Fatalf("check disk %d: %v", i, err)
		}
		clk.Advance(time.Second)
	}
	if n, err := b.FleetSessions(ctx, "h1"); err != nil || n != 0 {
		t.Fatalf("fleet sessions after a report of 0: %d, %v", n, err)
	}
	if err := b.ReportSessions(ctx, "gw-a", map[string]int{"h1": 2}, 3*time.Second); err != nil {
		t.Fatalf("report: %v", err)
	}
	if n, err := b.FleetSessions(ctx, "h1"); err != nil || n != 2 {
		t.Fatalf("fleet sessions: %d, %v; want 2", n, err)
	}
	after := testbin.BoltTxID(t, path)
	fi1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("txid %d -> %d over 11 reports and 10 disk checks; size %d -> %d, mtime %s -> %s",
		before, after, fi0.Size(), fi1.Size(), fi0.ModTime().Format(time.RFC3339Nano), fi1.ModTime().Format(time.RFC3339Nano))
	if after != before {
		t.Fatalf("idle calls committed %d transactions to the file, want none", after-before)
	}
	if _, t0 := b.Unwritable(); t0 != nil {
		t.Fatalf("unwritable on a healthy disk: %v", t0)
	}

	// A change still reaches the file.
	next := h
	next.Version = "v2"
	if _, err := b.PutHome(ctx, next, registry.CondOf(h)); err != nil {
		t.Fatalf("update home: %v", err)
	}
	if got := testbin.BoltTxID(t, path); got != after+1 {
		t.Fatalf("txid after a record change %d, want %d", got, after+1)
	}
}
