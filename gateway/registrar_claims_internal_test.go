package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// TestRegistrarClaims walks the target claims of admin homes on a real
// gateway (New on a temp data dir; no home is started): a target held by
// a live home is refused with target_taken naming the holder; claims left
// stale by a crash are taken over; a writer whose claim was taken between
// its record and its confirm puts its record back; moving and removing a
// home release its claim.
func TestRegistrarClaims(t *testing.T) {
	g := claimGateway(t, "")
	ctx := context.Background()
	put := func(id, target string) error {
		_, _, err := g.adminBackend().PutHome(ctx, id, admin.HomeRequest{Target: target}, 0)
		return err
	}
	holder := func(target string) string {
		c, err := g.store.GetClaim(ctx, target)
		if errors.Is(err, registry.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatalf("claim %s: %v", target, err)
		}
		return c.Home
	}

	t.Run("config home's target", func(t *testing.T) {
		err := put("new", "cfgt")
		fe, ok := fault.As(err)
		if !ok || fe.Kind != fault.Conflict || fe.Code != "target_taken" || fe.Field != "target" ||
			!strings.Contains(fe.Cause.Error(), `"cfg"`) || !strings.Contains(fe.Hint, "cfg") {
			t.Fatalf("PUT on the config's target: %#v", err)
		}
		if _, ok := g.homeWithID("new"); ok || holder("cfgt") != "cfg" {
			t.Fatalf("a refused home was registered, or the claim moved to %q", holder("cfgt"))
		}
	})

	t.Run("stale claims are taken over", func(t *testing.T) {
		// A writer crashed between its claim and its record ...
		if _, err := g.store.PutClaim(ctx, registry.Claim{Target: "ghostt", Home: "ghost", Owner: "gw-dead"}, registry.Cond{}); err != nil {
			t.Fatal(err)
		}
		// ... and a home moved without releasing its old target.
		mover := registry.Home{ID: "mover", Target: "elsewhere", Provider: "exec", Status: registry.StatusSleeping, Owner: "gw-dead"}
		if _, err := g.store.PutHome(ctx, mover, registry.Cond{}); err != nil {
			t.Fatal(err)
		}
		if _, err := g.store.PutClaim(ctx, registry.Claim{Target: "movedt", Home: "mover", Owner: "gw-dead"}, registry.Cond{}); err != nil {
			t.Fatal(err)
		}
		for id, target := range map[string]string{"heir1": "ghostt", "heir2": "movedt"} {
			if err := put(id, target); err != nil {
				t.Fatalf("PUT %s on the stale claim of %s: %v", id, target, err)
			}
			if h, ok := g.homeAt(target); !ok || h.Spec().ID != id || holder(target) != id {
				t.Fatalf("%s routes %v, claimed by %q; want %s", target, h, holder(target), id)
			}
		}
	})

	t.Run("claim taken before the confirm", func(t *testing.T) {
		real := g.store
		t.Cleanup(func() { g.useStore(real) })
		g.useStore(&usurper{Store: real, victim: "racer"})
		err := put("racer", "racet")
		if fe, ok := fault.As(err); !ok || fe.Code != "target_taken" || !strings.Contains(fe.Cause.Error(), `"usurper-racet"`) {
			t.Fatalf("PUT whose claim was taken: %v", err)
		}
		if _, err := real.GetHome(ctx, "racer"); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("the new home's record was not removed: %v", err)
		}
		if _, ok := g.homeWithID("racer"); ok {
			t.Fatal("the new home was registered")
		}

		// A home that exists keeps its record and its route when its move
		// to a new target loses.
		g.useStore(real)
		if err := put("racer", "racea"); err != nil {
			t.Fatal(err)
		}
		g.useStore(&usurper{Store: real, victim: "racer"})
		if err := put("racer", "raceb"); fault.KindOf(err) != fault.Conflict {
			t.Fatalf("move whose claim was taken: %v", err)
		}
		if rec, err := real.GetHome(ctx, "racer"); err != nil || rec.Target != "racea" {
			t.Fatalf("record after the lost move: %+v, %v; want target racea", rec, err)
		}
		if h, ok := g.homeAt("racea"); !ok || h.Spec().ID != "racer" || holder("racea") != "racer" {
			t.Fatalf("racea after the lost move: routes %v, claimed by %q", h, holder("racea"))
		}
	})

	t.Run("move and remove release", func(t *testing.T) {
		if err := put("mv", "m1"); err != nil {
			t.Fatal(err)
		}
		if err := put("mv", "m2"); err != nil {
			t.Fatal(err)
		}
		if holder("m1") != "" || holder("m2") != "mv" {
			t.Fatalf("after a move: m1 held by %q, m2 by %q", holder("m1"), holder("m2"))
		}
		h, _ := g.homeWithID("mv")
		if err := g.reg.RemoveHome(ctx, h, 0); err != nil {
			t.Fatalf("remove: %v", err)
		}
		if holder("m2") != "" {
			t.Fatalf("after the remove, m2 is held by %q", holder("m2"))
		}
	})
}

// claimGateway is a real gateway on a temp data dir with one config home,
// cfg at target cfgt, and the YAML extra appended at the top level. No
// home is started.
func claimGateway(t *testing.T, extra string) *Gateway {
	t.Helper()
	cfg := oneHomeConfig(t, "claims.yaml", filepath.Join(t.TempDir(), "data"), extra)
	g, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// usurper is a store on which, right after the record of home victim is
// written, another writer takes its target's claim for a live home of its
// own: what a second gateway of a fleet does when it judges the claim
// stale between the victim's claim and its record.
type usurper struct {
	registry.Store
	victim string
}

func (u *usurper) PutHome(ctx context.Context, h registry.Home, cond registry.Cond) (registry.Home, error) {
	stored, err := u.Store.PutHome(ctx, h, cond)
	if err != nil || h.ID != u.victim {
		return stored, err
	}
	c, cerr := u.GetClaim(ctx, h.Target)
	if cerr != nil || c.Home != h.ID {
		return stored, err
	}
	rec := registry.Home{ID: "usurper-" + h.Target, Target: h.Target, Provider: "exec", Status: registry.StatusSleeping, Owner: "gw-other"}
	if _, perr := u.Store.PutHome(ctx, rec, registry.Cond{}); perr != nil {
		return stored, fmt.Errorf("usurper's home: %w", perr)
	}
	if _, perr := u.PutClaim(ctx, registry.Claim{Target: h.Target, Home: rec.ID, Owner: "gw-other"}, registry.ClaimCond(c)); perr != nil {
		return stored, fmt.Errorf("usurper's claim: %w", perr)
	}
	u.victim = "" // once
	return stored, err
}

// useStore puts s in place of g's store, for the gateway and its
// registrar (a test's wrapper that counts or interferes with writes); the
// engine keeps the store it was built with.
func (g *Gateway) useStore(s registry.Store) {
	g.store = s
	g.reg = g.newRegistrar()
}
