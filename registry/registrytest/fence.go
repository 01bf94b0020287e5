package registrytest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// fenceCases are the conformance cases of fenced writes and change
// notifications.
var fenceCases = []struct {
	name string
	run  func(t *testing.T, open Opener)
}{
	{"FenceAdmitsLiveLease", testFenceAdmitsLiveLease},
	{"FenceRefusesLostLease", testFenceRefusesLostLease},
	{"FenceGuardsEveryRecord", testFenceGuardsEveryRecord},
	{"FencedUpdateNeverRetriesLostLease", testFencedUpdateNeverRetries},
	{"FencedDeleteRetriesOnlyLiveLease", testFencedDeleteRetries},
	{"ChangedOnUnlock", testChangedOnUnlock},
	{"ChangedOnWrite", testChangedOnWrite},
}

// notified bounds the wait for a change notification that must come.
const notified = 10 * time.Second

// WaitClosed fails t unless ch is closed within a generous bound (it is
// the failure's bound, not a measure of speed).
func WaitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(notified):
		t.Fatalf("%s: no notification within %s", what, notified)
	}
}

// isOpen reports whether ch is still open (no notification so far).
func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func mustLock(t *testing.T, s registry.Store, name, holder string, ttl time.Duration) registry.Lease {
	t.Helper()
	l, err := s.Lock(context.Background(), name, holder, ttl)
	if err != nil {
		t.Fatalf("lock %s for %s: %v", name, holder, err)
	}
	return l
}

func testFenceAdmitsLiveLease(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, SampleHome("h1"))
	l := mustLock(t, s, "home/h1", "gw-a", 10*time.Second)
	next := h
	next.Version = "v2"
	got, err := s.PutHome(ctx, next, registry.CondOf(h).Fenced(l))
	if err != nil {
		t.Fatalf("fenced write under the live lease: %v", err)
	}
	advance(8 * time.Second)
	if l, err = s.Renew(ctx, l, 10*time.Second); err != nil {
		t.Fatalf("renew: %v", err)
	}
	advance(8 * time.Second) // past the first expiry, inside the renewed one
	next = got
	next.Version = "v3"
	if got, err = s.PutHome(ctx, next, registry.CondOf(got).Fenced(l)); err != nil {
		t.Fatalf("fenced write under the renewed lease: %v", err)
	}
	if got.Generation != 3 || got.Version != "v3" {
		t.Fatalf("stored generation %d version %q, want 3 and v3", got.Generation, got.Version)
	}
}

func testFenceRefusesLostLease(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, SampleHome("h1"))
	a := mustLock(t, s, "home/h1", "gw-a", 10*time.Second)
	write := func(what string, l registry.Lease, want error) {
		t.Helper()
		cur, err := s.GetHome(ctx, "h1")
		if err != nil {
			t.Fatalf("%s: get: %v", what, err)
		}
		next := cur
		next.Version = what
		_, err = s.PutHome(ctx, next, registry.CondOf(cur).Fenced(l))
		if want == nil {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		}
		WantErr(t, what, err, want)
		after, gerr := s.GetHome(ctx, "h1")
		if gerr != nil || after.Generation != cur.Generation || after.Version != cur.Version {
			t.Fatalf("%s: a refused write changed the record: %+v (%v)", what, after, gerr)
		}
	}
	advance(11 * time.Second)
	write("expired, nobody took it", a, registry.ErrLeaseLost)
	b := mustLock(t, s, "home/h1", "gw-b", 10*time.Second)
	write("expired and taken over", a, registry.ErrLeaseLost)
	forged := b
	forged.Token = b.Token + 1
	write("a token above the live one", forged, registry.ErrLeaseLost)
	other := mustLock(t, s, "home/h2", "gw-b", 10*time.Second)
	wrongLock := other
	wrongLock.Name = "home/h3"
	write("a lock never held", wrongLock, registry.ErrLeaseLost)
	write("the live lease", b, nil)
	if err := s.Unlock(ctx, b); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	write("released", b, registry.ErrLeaseLost)
	// A stale generation and a lost fence: nothing is written either way.
	stale := h
	stale.Version = "stale"
	_, err := s.PutHome(ctx, stale, registry.CondOf(h).Fenced(a))
	if err == nil {
		t.Fatal("a write with a stale generation and a lost lease succeeded")
	}
}

func testFenceGuardsEveryRecord(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, SampleHome("h1"))
	app, err := s.PutApp(ctx, sampleApp("a"), registry.Cond{})
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	tgt, err := s.PutTarget(ctx, registry.Target{Version: "v1", Owner: "gw-a"}, registry.Cond{})
	if err != nil {
		t.Fatalf("create target: %v", err)
	}
	claim, err := s.PutClaim(ctx, registry.Claim{Target: "t1", Home: "h1", Owner: "gw-a"}, registry.Cond{})
	if err != nil {
		t.Fatalf("create claim: %v", err)
	}
	lost := mustLock(t, s, "home/h1", "gw-a", 10*time.Second)
	advance(11 * time.Second)
	live := mustLock(t, s, "home/h1", "gw-b", 10*time.Second)

	writes := []struct {
		name string
		do   func(l registry.Lease) error
	}{
		{"put target", func(l registry.Lease) error {
			_, err := s.PutTarget(ctx, tgt, targetCond(tgt).Fenced(l))
			return err
		}},
		{"put app", func(l registry.Lease) error {
			_, err := s.PutApp(ctx, app, registry.AppCond(app).Fenced(l))
			return err
		}},
		{"put claim", func(l registry.Lease) error {
			_, err := s.PutClaim(ctx, claim, registry.ClaimCond(claim).Fenced(l))
			return err
		}},
		{"delete home", func(l registry.Lease) error {
			return s.DeleteHome(ctx, h.ID, registry.CondOf(h).Fenced(l))
		}},
	}
	for _, w := range writes {
		WantErr(t, w.name+" under a lost lease", w.do(lost), registry.ErrLeaseLost)
	}
	for _, w := range writes {
		if err := w.do(live); err != nil {
			t.Fatalf("%s under the live lease: %v", w.name, err)
		}
	}
	if _, err := s.GetHome(ctx, "h1"); !isNotFound(err) {
		t.Fatalf("home after a fenced delete under the live lease: %v", err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, registry.ErrNotFound) }

// takenOver opens a store with home h1, whose lock gw-a held (lease a)
// until it expired and gw-b took it (lease b, live).
func takenOver(t *testing.T, open Opener) (s registry.Store, h registry.Home, a, b registry.Lease) {
	s, advance := open(t)
	h = mustCreateHome(t, s, SampleHome("h1"))
	a = mustLock(t, s, "home/h1", "gw-a", 10*time.Second)
	advance(11 * time.Second)
	b = mustLock(t, s, "home/h1", "gw-b", 10*time.Second)
	return s, h, a, b
}

func testFencedUpdateNeverRetries(t *testing.T, open Opener) {
	s, h, a, b := takenOver(t, open)
	ctx := context.Background()
	calls := 0
	_, err := registry.UpdateHomeUnder(ctx, s, h, "gw-a", a, func(r *registry.Home) {
		calls++
		r.Version = "late"
	})
	WantErr(t, "update under a lease taken over", err, registry.ErrLeaseLost)
	if calls != 1 {
		t.Fatalf("a write refused by the fence was applied %d times, want 1", calls)
	}
	// The live holder's update is retried over a conflicting unguarded
	// writer and wins.
	other := h
	other.Endpoint = "http://127.0.0.1:1"
	if _, err := s.PutHome(ctx, other, registry.CondOf(h)); err != nil {
		t.Fatalf("unguarded write: %v", err)
	}
	got, err := registry.UpdateHomeUnder(ctx, s, h, "gw-b", b, func(r *registry.Home) { r.Version = "v2" })
	if err != nil {
		t.Fatalf("update under the live lease after a conflict: %v", err)
	}
	if got.Version != "v2" || got.Endpoint != "http://127.0.0.1:1" {
		t.Fatalf("stored %+v: want the live holder's version over the other writer's endpoint", got)
	}
}

func testFencedDeleteRetries(t *testing.T, open Opener) {
	s, h, a, b := takenOver(t, open)
	ctx := context.Background()
	err := registry.DeleteHomeUnder(ctx, s, h, a)
	WantErr(t, "delete under a lease taken over", err, registry.ErrLeaseLost)
	if _, err := s.GetHome(ctx, "h1"); err != nil {
		t.Fatalf("home after a refused delete: %v", err)
	}
	// A writer that takes no lock changes the record between the live
	// holder's read and its delete: the delete reads again and wins.
	other := h
	other.Endpoint = "http://127.0.0.1:1"
	if _, err := s.PutHome(ctx, other, registry.CondOf(h)); err != nil {
		t.Fatalf("unguarded write: %v", err)
	}
	if err := registry.DeleteHomeUnder(ctx, s, h, b); err != nil {
		t.Fatalf("delete under the live lease after a conflict: %v", err)
	}
	if _, err := s.GetHome(ctx, "h1"); !isNotFound(err) {
		t.Fatalf("home after the delete: %v, want not found", err)
	}
	// A home gone before the delete is not found.
	err = registry.DeleteHomeUnder(ctx, s, h, b)
	WantErr(t, "delete of a home gone already", err, registry.ErrNotFound)
}

func testChangedOnUnlock(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	l := mustLock(t, s, "home/h1", "gw-a", time.Minute)
	ch := s.Changed("home/h1")
	other := s.Changed("home/h2")
	if !isOpen(ch) {
		t.Fatal("notified before the lock was released")
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	WaitClosed(t, "release of home/h1", ch)
	if !isOpen(other) {
		t.Fatal("the release of home/h1 woke the waiters of home/h2")
	}
	if !isOpen(s.Changed("home/h1")) {
		t.Fatal("a channel taken after the release is closed already")
	}
}

func testChangedOnWrite(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	ch := s.Changed(registry.HomeKey("h1"))
	h := mustCreateHome(t, s, SampleHome("h1"))
	WaitClosed(t, "home created", ch)
	ch = s.Changed(registry.HomeKey("h1"))
	next := h
	next.Version = "v2"
	if _, err := s.PutHome(ctx, next, registry.CondOf(h)); err != nil {
		t.Fatalf("update: %v", err)
	}
	WaitClosed(t, "home updated", ch)
	any := s.Changed(registry.AnyHomeKey)
	if _, err := s.PutHome(ctx, SampleHome("h2"), registry.Cond{}); err != nil {
		t.Fatalf("create h2: %v", err)
	}
	WaitClosed(t, "any home written", any)
	ch = s.Changed(registry.TargetKey)
	if _, err := s.PutTarget(ctx, registry.Target{Version: "v1"}, registry.Cond{}); err != nil {
		t.Fatalf("target: %v", err)
	}
	WaitClosed(t, "target written", ch)
	ch = s.Changed(registry.AppKey("a"))
	if _, err := s.PutApp(ctx, sampleApp("a"), registry.Cond{}); err != nil {
		t.Fatalf("app: %v", err)
	}
	WaitClosed(t, "app written", ch)
}
