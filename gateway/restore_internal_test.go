package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// readCounter is a store that counts the reads a restore makes of it.
type readCounter struct {
	registry.Store
	getClaim, listClaims, listHomes, getHome atomic.Int64
}

func (s *readCounter) GetClaim(ctx context.Context, target string) (registry.Claim, error) {
	s.getClaim.Add(1)
	return s.Store.GetClaim(ctx, target)
}

func (s *readCounter) ListClaims(ctx context.Context) ([]registry.Claim, error) {
	s.listClaims.Add(1)
	return s.Store.ListClaims(ctx)
}

func (s *readCounter) ListHomes(ctx context.Context) ([]registry.Home, error) {
	s.listHomes.Add(1)
	return s.Store.ListHomes(ctx)
}

func (s *readCounter) GetHome(ctx context.Context, id string) (registry.Home, error) {
	s.getHome.Add(1)
	return s.Store.GetHome(ctx, id)
}

// TestRestoreReadsTheIndexOnce restores stored homes on a real gateway
// (New on a store seeded with homes registered through the admin API) and
// counts the store reads of a restore: the homes and the target index are
// each listed once, and a claim is read one at a time only for a home the
// listing does not show holding its target. A home whose claim is missing
// claims it and is restored; one whose target another home holds is not.
func TestRestoreReadsTheIndexOnce(t *testing.T) {
	const n = 200
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	seedStoredHomes(t, dir, n)
	b, err := bolt.Open(filepath.Join(dir, control.StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := b.GetHome(ctx, "h000000")
	if err != nil {
		t.Fatal(err)
	}
	lost, loser := rec, rec
	lost.ID, lost.Target = "lost", "lostt"      // its claim is missing
	loser.ID, loser.Target = "loser", "h000001" // h000001 holds its target
	if err := b.SeedHomes(ctx, []registry.Home{lost, loser}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	g, err := New(ctx, restoreConfig(t, dir), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(g.Close)
	if got := g.homeCount(); got != n+2 {
		t.Fatalf("%d homes after start, want %d (cfg, %d stored, lost)", got, n+2, n)
	}
	if h, ok := g.homeAt("lostt"); !ok || h.Spec().ID != "lost" {
		t.Fatal("the home whose claim was missing was not restored on its target")
	}
	if c, err := g.store.GetClaim(ctx, "lostt"); err != nil || c.Home != "lost" {
		t.Fatalf("claim on lostt: %+v, %v", c, err)
	}
	if _, ok := g.homeWithID("loser"); ok {
		t.Fatal("a home whose target another home holds was restored")
	}
	if h, ok := g.homeAt("h000001"); !ok || h.Spec().ID != "h000001" {
		t.Fatal("h000001 lost its target")
	}

	// The same restore again, counted: every home but loser holds its
	// target now.
	rc := &readCounter{Store: g.store}
	g.useStore(rc)
	if err := g.reg.RestoreHomes(ctx); err != nil {
		t.Fatal(err)
	}
	if l, c := rc.listHomes.Load(), rc.listClaims.Load(); l != 1 || c != 1 {
		t.Errorf("restore listed the homes %d times and the claims %d times, want once each", l, c)
	}
	// loser's claim: read by ClaimTarget, and its holder's record read to
	// see whether the claim is stale.
	if c, h := rc.getClaim.Load(), rc.getHome.Load(); c > 1 || h > 1 {
		t.Errorf("restore of %d homes read %d claims and %d homes one at a time, want at most 1 each", n+2, c, h)
	}
	if got := g.homeCount(); got != n+2 {
		t.Fatalf("%d homes after the second restore, want %d", got, n+2)
	}
}

// TestRestoredHomeIsSmall guards the memory a home restored from the
// store costs the gateway before it ever wakes (the route table, the
// engine, and what they hold), in bytes and in heap objects (which the
// garbage collector visits one by one): a large gateway holds 100,000 of
// them. It compares the live heap of a started gateway with 5,001 stored
// homes and with 1; no timing.
func TestRestoredHomeIsSmall(t *testing.T) {
	const n = 5000
	live := func(homes int) runtime.MemStats {
		dir := filepath.Join(t.TempDir(), "data")
		seedStoredHomes(t, dir, homes)
		g, err := New(context.Background(), restoreConfig(t, dir), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer g.Close()
		if got := g.homeCount(); got != homes+1 {
			t.Fatalf("%d homes after start, want %d", got, homes+1)
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m
	}
	live(1) // what the first gateway of the process allocates once
	one, many := live(1), live(n+1)
	bytes := float64(int64(many.HeapAlloc)-int64(one.HeapAlloc)) / n
	objects := float64(int64(many.HeapObjects)-int64(one.HeapObjects)) / n
	t.Logf("a restored home: %.0f bytes, %.1f heap objects", bytes, objects)
	if bytes > 1100 || objects > 6 {
		t.Errorf("a restored home costs %.0f bytes in %.1f heap objects, want at most 1,100 bytes in 6", bytes, objects)
	}
}
