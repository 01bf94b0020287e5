package registrytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/registry"
)

// The target index (registry.Claims): the same compare-and-set contract as
// homes and apps, and the claim protocol of registry.ClaimTarget,
// ConfirmClaim, ReleaseClaim and ForceClaim on top of it.

// claimCases are the conformance cases of the target index.
var claimCases = []struct {
	name string
	run  func(t *testing.T, open Opener)
}{
	{"ClaimCreateAndGet", testClaimCreateAndGet},
	{"ClaimCAS", testClaimCAS},
	{"ClaimListAndDelete", testClaimListAndDelete},
	{"ClaimConcurrentCreate", testClaimConcurrentCreate},
	{"ClaimCancelledContext", testClaimCancelledContext},
	{"ClaimStaleTakeover", testClaimStaleTakeover},
	{"ClaimProtocolRace", testClaimProtocolRace},
	{"ClaimReleaseAndForce", testClaimReleaseAndForce},
}

func testClaimCreateAndGet(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	_, err := s.GetClaim(ctx, "alice")
	WantErr(t, "get missing claim", err, registry.ErrNotFound)
	stored, err := s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h1", Owner: "gw-a", Generation: 42}, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	want := registry.Claim{Target: "alice", Home: "h1", Generation: 1, Owner: "gw-a"}
	if stored != want {
		t.Fatalf("created %+v, want %+v", stored, want)
	}
	if got, err := s.GetClaim(ctx, "alice"); err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []registry.Claim{{Home: "h1"}, {Target: "bob"}} {
		if _, err := s.PutClaim(ctx, c, registry.Cond{}); err == nil || errors.Is(err, registry.ErrConflict) {
			t.Fatalf("claim %+v: %v, want a validation error", c, err)
		}
	}
	_, err = s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h2", Owner: "gw-b"}, registry.Cond{})
	WantErr(t, "create on an existing claim", err, registry.ErrConflict)
	if got, _ := s.GetClaim(ctx, "alice"); got != want {
		t.Fatalf("after a refused create: %+v", got)
	}
}

func testClaimCAS(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1, err := s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h1", Owner: "gw-a"}, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	v2, err := s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h2", Owner: "gw-b"}, registry.ClaimCond(v1))
	if err != nil || v2.Generation != 2 || v2.Owner != "gw-b" || v2.Home != "h2" {
		t.Fatalf("update: %+v, %v", v2, err)
	}
	_, err = s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h3", Owner: "gw-a"}, registry.ClaimCond(v1))
	WantErr(t, "stale generation", err, registry.ErrConflict)
	_, err = s.PutClaim(ctx, registry.Claim{Target: "alice", Home: "h3", Owner: "gw-a"}, registry.Cond{Generation: 2, Owner: "gw-a"})
	WantErr(t, "wrong owner", err, registry.ErrConflict)
	_, err = s.PutClaim(ctx, registry.Claim{Target: "bob", Home: "h3", Owner: "gw-a"}, registry.Cond{Generation: 1, Owner: "gw-a"})
	WantErr(t, "update of a missing claim", err, registry.ErrNotFound)
	if got, err := s.GetClaim(ctx, "alice"); err != nil || got != v2 {
		t.Fatalf("after refused writes: %+v, %v; want %+v", got, err, v2)
	}
}

func testClaimListAndDelete(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	claims, err := s.ListClaims(ctx)
	if err != nil || claims == nil || len(claims) != 0 {
		t.Fatalf("empty list: %#v, %v; want an empty non-nil list", claims, err)
	}
	WantErr(t, "delete from an empty index", s.DeleteClaim(ctx, "a", registry.Cond{Generation: 1, Owner: "gw-a"}), registry.ErrNotFound)
	var a registry.Claim
	for _, target := range []string{"c", "a", "b"} {
		c, err := s.PutClaim(ctx, registry.Claim{Target: target, Home: "h-" + target, Owner: "gw-a"}, registry.Cond{})
		if err != nil {
			t.Fatalf("create %s: %v", target, err)
		}
		if target == "a" {
			a = c
		}
	}
	claims, err = s.ListClaims(ctx)
	if err != nil || len(claims) != 3 || claims[0].Target != "a" || claims[1].Target != "b" || claims[2].Target != "c" {
		t.Fatalf("list: %+v, %v; want a, b, c", claims, err)
	}
	WantErr(t, "delete with wrong generation", s.DeleteClaim(ctx, "a", registry.Cond{Generation: 2, Owner: "gw-a"}), registry.ErrConflict)
	WantErr(t, "delete with wrong owner", s.DeleteClaim(ctx, "a", registry.Cond{Generation: 1, Owner: "gw-b"}), registry.ErrConflict)
	WantErr(t, "delete with create condition", s.DeleteClaim(ctx, "a", registry.Cond{}), registry.ErrConflict)
	if err := s.DeleteClaim(ctx, "a", registry.ClaimCond(a)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.GetClaim(ctx, "a")
	WantErr(t, "get deleted claim", err, registry.ErrNotFound)
	WantErr(t, "delete twice", s.DeleteClaim(ctx, "a", registry.ClaimCond(a)), registry.ErrNotFound)
	again, err := s.PutClaim(ctx, registry.Claim{Target: "a", Home: "h9", Owner: "gw-b"}, registry.Cond{})
	if err != nil || again.Generation != 1 {
		t.Fatalf("re-create a deleted claim: %+v, %v", again, err)
	}
	// The index is its own record: homes neither write nor remove claims.
	h := mustCreateHome(t, s, SampleHome("h1"))
	_, err = s.GetClaim(ctx, h.Target)
	WantErr(t, "claim of a home written without one", err, registry.ErrNotFound)
	if _, err := s.PutClaim(ctx, registry.Claim{Target: h.Target, Home: "h1", Owner: "gw-a"}, registry.Cond{}); err != nil {
		t.Fatalf("claim h1's target: %v", err)
	}
	if err := s.DeleteHome(ctx, "h1", registry.CondOf(h)); err != nil {
		t.Fatalf("delete home: %v", err)
	}
	if _, err := s.GetClaim(ctx, h.Target); err != nil {
		t.Fatalf("claim after its home was deleted: %v", err)
	}
}

// testClaimConcurrentCreate races writers for one target: exactly one
// create wins, then exactly one compare-and-set on the winner's record.
func testClaimConcurrentCreate(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	const writers = 16
	race := func(cond registry.Cond) (won []registry.Claim) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				c, err := s.PutClaim(ctx, registry.Claim{Target: "alice", Home: fmt.Sprintf("h%d", i), Owner: "gw-a"}, cond)
				if err != nil && !errors.Is(err, registry.ErrConflict) {
					t.Errorf("writer %d: %v", i, err)
				}
				if err == nil {
					mu.Lock()
					won = append(won, c)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return won
	}
	won := race(registry.Cond{})
	if len(won) != 1 {
		t.Fatalf("%d concurrent creates won, want 1: %+v", len(won), won)
	}
	again := race(registry.ClaimCond(won[0]))
	if len(again) != 1 || again[0].Generation != 2 {
		t.Fatalf("%d concurrent updates won, want 1 at generation 2: %+v", len(again), again)
	}
	if got, err := s.GetClaim(ctx, "alice"); err != nil || got != again[0] {
		t.Fatalf("stored %+v, %v; want the winner %+v", got, err, again[0])
	}
}

func testClaimCancelledContext(t *testing.T, open Opener) {
	s, _ := open(t)
	live := context.Background()
	v1, err := s.PutClaim(live, registry.Claim{Target: "alice", Home: "h1", Owner: "gw-a"}, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	ctx, cancel := context.WithCancel(live)
	cancel()
	check := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: got %v, want context.Canceled", call, err)
		}
	}
	_, err = s.GetClaim(ctx, "alice")
	check("GetClaim", err)
	_, err = s.ListClaims(ctx)
	check("ListClaims", err)
	_, err = s.PutClaim(ctx, registry.Claim{Target: "bob", Home: "h2", Owner: "gw-a"}, registry.Cond{})
	check("PutClaim", err)
	check("DeleteClaim", s.DeleteClaim(ctx, "alice", registry.ClaimCond(v1)))
	_, err = registry.ClaimTarget(ctx, s, "carol", "h3", "gw-a")
	check("ClaimTarget", err)
	if _, err := s.GetClaim(live, "bob"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("claim created with a cancelled context: %v", err)
	}
	if got, err := s.GetClaim(live, "alice"); err != nil || got != v1 {
		t.Fatalf("claim after cancelled writes: %+v, %v", got, err)
	}
}

// testClaimStaleTakeover checks who may take a claim: nobody while its
// home's record names the target; anybody once the record is gone or
// names another target (a writer that crashed between claim and home
// record, or a home that moved).
func testClaimStaleTakeover(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	live := SampleHome("live") // target user-live
	mustCreateHome(t, s, live)
	moved := SampleHome("moved")
	moved.Target = "elsewhere"
	mustCreateHome(t, s, moved)
	for _, c := range []registry.Claim{
		{Target: live.Target, Home: "live", Owner: "gw-a"},
		{Target: "ghost-target", Home: "ghost", Owner: "gw-a"},
		{Target: "old-target", Home: "moved", Owner: "gw-a"},
	} {
		if _, err := s.PutClaim(ctx, c, registry.Cond{}); err != nil {
			t.Fatalf("claim %s: %v", c.Target, err)
		}
	}

	_, err := registry.ClaimTarget(ctx, s, live.Target, "h2", "gw-b")
	var taken *registry.TakenError
	if !errors.As(err, &taken) || taken.Holder != "live" || taken.Target != live.Target {
		t.Fatalf("claim a live home's target: %v, want a TakenError naming home live", err)
	}
	for _, tc := range []struct{ target, stale string }{{"ghost-target", "ghost"}, {"old-target", "moved"}} {
		out, err := registry.ClaimTarget(ctx, s, tc.target, "h2", "gw-b")
		if err != nil || out.Stale != tc.stale || out.Had || out.Claim.Home != "h2" || out.Claim.Generation != 2 {
			t.Fatalf("take over the stale claim of %s: %+v, %v", tc.stale, out, err)
		}
	}
	out, err := registry.ClaimTarget(ctx, s, "ghost-target", "h2", "gw-b")
	if err != nil || !out.Had || out.Stale != "" {
		t.Fatalf("claim a target already held: %+v, %v", out, err)
	}
	out, err = registry.ClaimTarget(ctx, s, "fresh", "h2", "gw-b")
	if err != nil || out.Had || out.Claim.Generation != 1 {
		t.Fatalf("claim a free target: %+v, %v", out, err)
	}
}

// testClaimProtocolRace runs the whole protocol (claim, write the home
// record, confirm; undo the record when the confirm finds the claim
// taken) in many writers at once with nothing else between them: exactly
// one writer holds the target, its record names it, and no other record
// does.
func testClaimProtocolRace(t *testing.T, open Opener) {
	s, _ := open(t)
	const writers, rounds = 6, 10
	for round := range rounds {
		target := fmt.Sprintf("t%d", round)
		won := make([]bool, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				ok, err := claimAndWrite(s, fmt.Sprintf("r%dh%d", round, i), target)
				var taken *registry.TakenError
				if err != nil && !errors.As(err, &taken) {
					t.Errorf("round %d writer %d: %v", round, i, err)
				}
				won[i] = ok
			})
		}
		wg.Wait()
		var winners []string
		for i, ok := range won {
			if ok {
				winners = append(winners, fmt.Sprintf("r%dh%d", round, i))
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d writers hold %s, want 1: %v", round, len(winners), target, winners)
		}
		c, err := s.GetClaim(context.Background(), target)
		if err != nil || c.Home != winners[0] {
			t.Fatalf("round %d: claim %+v, %v; want it held by %s", round, c, err, winners[0])
		}
	}
	homes, err := s.ListHomes(context.Background())
	if err != nil || len(homes) != rounds {
		t.Fatalf("%d home records after %d rounds (%v), want one per round: %+v", len(homes), rounds, err, homes)
	}
}

// claimAndWrite is one writer of the protocol for a new home id on target:
// it reports whether it holds the target at the end.
func claimAndWrite(s registry.Store, id, target string) (bool, error) {
	ctx := context.Background()
	owner := "gw-" + id
	out, err := registry.ClaimTarget(ctx, s, target, id, owner)
	if err != nil {
		return false, err
	}
	h := SampleHome(id)
	h.Target, h.Owner = target, owner
	stored, err := s.PutHome(ctx, h, registry.Cond{})
	if err != nil {
		return false, err
	}
	if _, err := registry.ConfirmClaim(ctx, s, out.Claim, owner); err != nil {
		if derr := s.DeleteHome(ctx, id, registry.CondOf(stored)); derr != nil {
			return false, fmt.Errorf("undo after %w: %w", err, derr)
		}
		return false, err
	}
	return true, nil
}

func testClaimReleaseAndForce(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	if _, err := registry.ClaimTarget(ctx, s, "alice", "h1", "gw-a"); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := registry.ReleaseClaim(ctx, s, "alice", "h2"); err != nil {
		t.Fatalf("release by another home: %v", err)
	}
	if c, err := s.GetClaim(ctx, "alice"); err != nil || c.Home != "h1" {
		t.Fatalf("a release by another home removed the claim: %+v, %v", c, err)
	}
	prev, err := registry.ForceClaim(ctx, s, "alice", "cfg", "gw-b")
	if err != nil || prev.Home != "h1" {
		t.Fatalf("force: previous %+v, %v; want h1", prev, err)
	}
	if prev, err := registry.ForceClaim(ctx, s, "alice", "cfg", "gw-b"); err != nil || prev != (registry.Claim{}) {
		t.Fatalf("force again: previous %+v, %v; want none", prev, err)
	}
	if prev, err := registry.ForceClaim(ctx, s, "bob", "cfg2", "gw-b"); err != nil || prev != (registry.Claim{}) {
		t.Fatalf("force a free target: previous %+v, %v; want none", prev, err)
	}
	if err := registry.ReleaseClaim(ctx, s, "alice", "cfg"); err != nil {
		t.Fatalf("release: %v", err)
	}
	_, err = s.GetClaim(ctx, "alice")
	WantErr(t, "claim after its release", err, registry.ErrNotFound)
	if err := registry.ReleaseClaim(ctx, s, "alice", "cfg"); err != nil {
		t.Fatalf("release twice: %v", err)
	}
}
