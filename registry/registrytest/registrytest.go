// Package registrytest is the conformance suite of registry.Store: the
// behaviour every store implementation must show (compare-and-set on
// generation and owner, a distinct not-found error, exclusive leases with
// increasing fencing tokens and expiry, session reports that sum and
// expire, honoured contexts, and a target index whose claims keep one
// home per target under concurrent writers). A backend runs it unchanged
// with Run.
package registrytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// Opener opens a fresh, empty Store for one test and returns with it
// advance, which moves the clock that drives the store's lease and
// session-report expiry forward by d (a store on a Clock passes its
// Advance). The opener registers the store's Close with t.Cleanup.
type Opener func(t *testing.T) (s registry.Store, advance func(d time.Duration))

// Clock is a manual clock for stores that take a Now function; safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run runs the behaviour every Store implementation must show, each case
// as a subtest on a store of its own from open.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		run  func(t *testing.T, open Opener)
	}{
		{"HomeCreateAndGet", testHomeCreateAndGet},
		{"HomeCASSuccess", testHomeCASSuccess},
		{"HomeStaleGeneration", testHomeStaleGeneration},
		{"HomeWrongOwner", testHomeWrongOwner},
		{"HomeCreateOnExisting", testHomeCreateOnExisting},
		{"HomeValidation", testHomeValidation},
		{"NotFoundIsDistinct", testNotFoundIsDistinct},
		{"ListHomesOrdered", testListHomesOrdered},
		{"DeleteHome", testDeleteHome},
		{"TargetCAS", testTargetCAS},
		{"ConcurrentCASIncrements", testConcurrentCASIncrements},
		{"LeaseExclusive", testLeaseExclusive},
		{"LeaseRace", testLeaseRace},
		{"LeaseExpiryTakeover", testLeaseExpiryTakeover},
		{"LeaseRenew", testLeaseRenew},
		{"FencingTokensIncrease", testFencingTokensIncrease},
		{"LostLease", testLostLease},
		{"LockArguments", testLockArguments},
		{"SessionsSumAndReplace", testSessionsSumAndReplace},
		{"SessionsExpire", testSessionsExpire},
		{"SessionsArguments", testSessionsArguments},
		{"CancelledContext", testCancelledContext},
		{"AppCreateAndGet", testAppCreateAndGet},
		{"AppCAS", testAppCAS},
		{"AppListAndDelete", testAppListAndDelete},
		{"AppCancelledContext", testAppCancelledContext},
		{"AppStateCAS", testAppStateCAS},
	}
	for _, c := range append(append(cases, claimCases...), fenceCases...) {
		t.Run(c.name, func(t *testing.T) { c.run(t, open) })
	}
}

// SampleHome returns a home with every field set.
func SampleHome(id string) registry.Home {
	at := time.Date(2029, 12, 31, 23, 0, 0, 123456789, time.UTC)
	return registry.Home{
		ID:              id,
		Target:          "user-" + id,
		Provider:        "exec",
		ProviderRef:     "pid=42",
		Endpoint:        "http://127.0.0.1:40123",
		RelayTokenRef:   "env:RELAY_" + id,
		Version:         "v1",
		Status:          registry.StatusRunning,
		Verdict:         registry.VerdictHealthy,
		Reason:          "",
		WantRunning:     true,
		LastWakeAt:      at,
		LastWakeLatency: 1500 * time.Millisecond,
		LastReadyAt:     at.Add(2 * time.Second),
		Dynamic:         true,
		IdleTimeout:     90 * time.Second,
		Probe:           "http",
		Owner:           "gw-a",
	}
}

// mustCreateHome stores a new home and returns the stored record.
func mustCreateHome(t *testing.T, s registry.Store, h registry.Home) registry.Home {
	t.Helper()
	got, err := s.PutHome(context.Background(), h, registry.Cond{})
	if err != nil {
		t.Fatalf("create home %s: %v", h.ID, err)
	}
	return got
}

// targetCond returns the condition that matches t as it was read.
func targetCond(t registry.Target) registry.Cond {
	return registry.Cond{Generation: t.Generation, Owner: t.Owner}
}

// SameHome reports how a and b differ, or "" when they are equal (times are
// compared as instants).
func SameHome(a, b registry.Home) string {
	if !a.LastWakeAt.Equal(b.LastWakeAt) || !a.LastReadyAt.Equal(b.LastReadyAt) {
		return fmt.Sprintf("times differ: %v/%v vs %v/%v", a.LastWakeAt, a.LastReadyAt, b.LastWakeAt, b.LastReadyAt)
	}
	a.LastWakeAt, a.LastReadyAt, b.LastWakeAt, b.LastReadyAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	// Compared in their stored form: a nil and an empty list are alike.
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	if erra != nil || errb != nil || !bytes.Equal(ja, jb) {
		return fmt.Sprintf("%+v vs %+v", a, b)
	}
	return ""
}

// WantErr fails t unless err matches want (and none of the other sentinels).
func WantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	for _, other := range []error{registry.ErrNotFound, registry.ErrConflict, registry.ErrLocked, registry.ErrLeaseLost, registry.ErrUnavailable} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%s: error %v also matches %v", what, err, other)
		}
	}
}

func testHomeCreateAndGet(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	in := SampleHome("h1")
	in.Generation = 99 // ignored: the store sets it
	stored, err := s.PutHome(ctx, in, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if stored.Generation != 1 || stored.Owner != "gw-a" {
		t.Fatalf("created generation %d owner %q, want 1 and gw-a", stored.Generation, stored.Owner)
	}
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	want := SampleHome("h1")
	want.Generation = 1
	if d := SameHome(got, want); d != "" {
		t.Fatalf("read back: %s", d)
	}
	if d := SameHome(got, stored); d != "" {
		t.Fatalf("returned record differs from stored one: %s", d)
	}
}

func testHomeCASSuccess(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, SampleHome("h1"))
	for i := 2; i <= 4; i++ {
		next := h
		next.Version = fmt.Sprintf("v%d", i)
		next.Owner = fmt.Sprintf("lease-%d", i)
		got, err := s.PutHome(ctx, next, registry.CondOf(h))
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if got.Generation != uint64(i) || got.Owner != next.Owner || got.Version != next.Version {
			t.Fatalf("update %d returned generation %d owner %q version %q", i, got.Generation, got.Owner, got.Version)
		}
		read, err := s.GetHome(ctx, "h1")
		if err != nil {
			t.Fatalf("get after update %d: %v", i, err)
		}
		if d := SameHome(read, got); d != "" {
			t.Fatalf("after update %d: %s", i, d)
		}
		h = read
	}
}

func testHomeStaleGeneration(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, SampleHome("h1"))
	v2 := v1
	v2.Version = "v2"
	v2, err := s.PutHome(ctx, v2, registry.CondOf(v1))
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	stale := v1
	stale.Version = "stale"
	_, err = s.PutHome(ctx, stale, registry.CondOf(v1))
	WantErr(t, "write with stale generation", err, registry.ErrConflict)
	if !strings.Contains(err.Error(), "h1") {
		t.Fatalf("error %q does not name the home", err)
	}
	ahead := registry.Cond{Generation: v2.Generation + 1, Owner: v2.Owner}
	_, err = s.PutHome(ctx, stale, ahead)
	WantErr(t, "write with future generation", err, registry.ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := SameHome(got, v2); d != "" {
		t.Fatalf("conflicting write changed the record: %s", d)
	}
}

func testHomeWrongOwner(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, SampleHome("h1"))
	next := v1
	next.Version = "v2"
	_, err := s.PutHome(ctx, next, registry.Cond{Generation: v1.Generation, Owner: "gw-b"})
	WantErr(t, "write with wrong owner", err, registry.ErrConflict)
	_, err = s.PutHome(ctx, next, registry.Cond{Generation: v1.Generation})
	WantErr(t, "write with empty owner", err, registry.ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := SameHome(got, v1); d != "" {
		t.Fatalf("conflicting write changed the record: %s", d)
	}
}

func testHomeCreateOnExisting(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, SampleHome("h1"))
	again := SampleHome("h1")
	again.Version = "other"
	_, err := s.PutHome(ctx, again, registry.Cond{})
	WantErr(t, "create over existing home", err, registry.ErrConflict)
	_, err = s.PutHome(ctx, again, registry.Cond{Owner: v1.Owner})
	WantErr(t, "create over existing home with its owner", err, registry.ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := SameHome(got, v1); d != "" {
		t.Fatalf("failed create changed the record: %s", d)
	}
}

func testHomeValidation(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	noID := SampleHome("")
	noID.Target = "alice"
	_, err := s.PutHome(ctx, noID, registry.Cond{})
	if err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("home without id: got %v, want an error naming the id", err)
	}
	noTarget := SampleHome("h1")
	noTarget.Target = ""
	_, err = s.PutHome(ctx, noTarget, registry.Cond{})
	if err == nil || !strings.Contains(err.Error(), "target") {
		t.Fatalf("home without target: got %v, want an error naming the target", err)
	}
	for _, sentinel := range []error{registry.ErrNotFound, registry.ErrConflict} {
		if errors.Is(err, sentinel) {
			t.Fatalf("validation error %v matches %v", err, sentinel)
		}
	}
	_, err = s.GetHome(ctx, "h1")
	WantErr(t, "get after rejected write", err, registry.ErrNotFound)
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 0 {
		t.Fatalf("list after rejected writes: %d homes, %v", len(homes), err)
	}
}

func testNotFoundIsDistinct(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	_, err := s.GetHome(ctx, "ghost")
	WantErr(t, "get missing home", err, registry.ErrNotFound)
	if !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("error %q does not name the home", err)
	}
	err = s.DeleteHome(ctx, "ghost", registry.Cond{Generation: 1})
	WantErr(t, "delete missing home", err, registry.ErrNotFound)
	h := SampleHome("ghost")
	_, err = s.PutHome(ctx, h, registry.Cond{Generation: 3, Owner: h.Owner})
	WantErr(t, "update missing home", err, registry.ErrNotFound)
	_, err = s.GetTarget(ctx)
	WantErr(t, "get unset target", err, registry.ErrNotFound)
	_, err = s.PutTarget(ctx, registry.Target{Version: "v1"}, registry.Cond{Generation: 1})
	WantErr(t, "update unset target", err, registry.ErrNotFound)

	// A conflict on an existing record is not a not-found.
	v1 := mustCreateHome(t, s, SampleHome("h1"))
	_, err = s.PutHome(ctx, v1, registry.Cond{Generation: 7, Owner: v1.Owner})
	WantErr(t, "update with wrong generation", err, registry.ErrConflict)
}

func testListHomesOrdered(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 0 {
		t.Fatalf("empty store lists %d homes, %v", len(homes), err)
	}
	for _, id := range []string{"h3", "a10", "h1", "a2", "b"} {
		mustCreateHome(t, s, SampleHome(id))
	}
	homes, err = s.ListHomes(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var ids []string
	for _, h := range homes {
		ids = append(ids, h.ID)
		if h.Generation != 1 || h.Target != "user-"+h.ID {
			t.Fatalf("listed home %+v is not the stored one", h)
		}
	}
	if got, want := strings.Join(ids, ","), "a10,a2,b,h1,h3"; got != want {
		t.Fatalf("listed ids %s, want %s", got, want)
	}
}

func testDeleteHome(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, SampleHome("h1"))
	mustCreateHome(t, s, SampleHome("h2"))
	err := s.DeleteHome(ctx, "h1", registry.Cond{Generation: v1.Generation + 1, Owner: v1.Owner})
	WantErr(t, "delete with wrong generation", err, registry.ErrConflict)
	err = s.DeleteHome(ctx, "h1", registry.Cond{Generation: v1.Generation, Owner: "gw-b"})
	WantErr(t, "delete with wrong owner", err, registry.ErrConflict)
	err = s.DeleteHome(ctx, "h1", registry.Cond{})
	WantErr(t, "delete with create condition", err, registry.ErrConflict)
	if _, err := s.GetHome(ctx, "h1"); err != nil {
		t.Fatalf("home gone after refused deletes: %v", err)
	}
	if err := s.DeleteHome(ctx, "h1", registry.CondOf(v1)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.GetHome(ctx, "h1")
	WantErr(t, "get deleted home", err, registry.ErrNotFound)
	err = s.DeleteHome(ctx, "h1", registry.CondOf(v1))
	WantErr(t, "delete twice", err, registry.ErrNotFound)
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 1 || homes[0].ID != "h2" {
		t.Fatalf("after delete: %+v, %v; want only h2", homes, err)
	}
	// The id can be created afresh.
	again, err := s.PutHome(ctx, SampleHome("h1"), registry.Cond{})
	if err != nil || again.Generation != 1 {
		t.Fatalf("re-create deleted home: generation %d, %v", again.Generation, err)
	}
}

func testTargetCAS(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := registry.Target{Version: "v1", Image: "img:v1", Command: []string{"home", "--port", "{port}"}, UpdatedAt: at, Owner: "gw-a"}
	v1, err := s.PutTarget(ctx, in, registry.Cond{})
	if err != nil {
		t.Fatalf("create target: %v", err)
	}
	if v1.Generation != 1 || v1.Owner != "gw-a" {
		t.Fatalf("created target generation %d owner %q", v1.Generation, v1.Owner)
	}
	got, err := s.GetTarget(ctx)
	if err != nil {
		t.Fatalf("get target: %v", err)
	}
	if got.Version != "v1" || got.Image != "img:v1" || strings.Join(got.Command, " ") != "home --port {port}" ||
		!got.UpdatedAt.Equal(at) || got.Generation != 1 || got.Owner != "gw-a" {
		t.Fatalf("read back target %+v", got)
	}

	_, err = s.PutTarget(ctx, in, registry.Cond{})
	WantErr(t, "create target twice", err, registry.ErrConflict)

	bad := got
	bad.BadVersion = "v1"
	bad.Owner = "roller"
	v2, err := s.PutTarget(ctx, bad, targetCond(got))
	if err != nil {
		t.Fatalf("update target: %v", err)
	}
	if v2.Generation != 2 || v2.Owner != "roller" || v2.BadVersion != "v1" {
		t.Fatalf("updated target %+v", v2)
	}
	_, err = s.PutTarget(ctx, registry.Target{Version: "v3"}, targetCond(got))
	WantErr(t, "target write with stale generation", err, registry.ErrConflict)
	_, err = s.PutTarget(ctx, registry.Target{Version: "v3"}, registry.Cond{Generation: 2, Owner: "gw-a"})
	WantErr(t, "target write with wrong owner", err, registry.ErrConflict)
	got, err = s.GetTarget(ctx)
	if err != nil || got.Version != "v1" || got.BadVersion != "v1" || got.Generation != 2 {
		t.Fatalf("target after refused writes: %+v, %v", got, err)
	}
}

func testConcurrentCASIncrements(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	start := SampleHome("h1")
	start.Version = "0"
	mustCreateHome(t, s, start)

	const writers = 50
	const maxAttempts = 10000
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		successes int
		conflicts int
		failures  []error
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("writer-%d", w)
			for attempt := 0; attempt < maxAttempts; attempt++ {
				cur, err := s.GetHome(ctx, "h1")
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				n, err := strconv.Atoi(cur.Version)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("stored counter %q: %w", cur.Version, err))
					mu.Unlock()
					return
				}
				next := cur
				next.Version = strconv.Itoa(n + 1)
				next.Owner = owner
				_, err = s.PutHome(ctx, next, registry.CondOf(cur))
				mu.Lock()
				switch {
				case err == nil:
					successes++
				case errors.Is(err, registry.ErrConflict):
					conflicts++
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
				if !errors.Is(err, registry.ErrConflict) {
					return
				}
			}
			mu.Lock()
			failures = append(failures, fmt.Errorf("%s gave up after %d conflicts", owner, maxAttempts))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d writers failed, first: %v", len(failures), failures[0])
	}
	if successes != writers {
		t.Fatalf("%d successful increments, want %d", successes, writers)
	}
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Version != strconv.Itoa(writers) || got.Generation != writers+1 {
		t.Fatalf("counter %s at generation %d, want %d at generation %d (%d conflicts retried)",
			got.Version, got.Generation, writers, writers+1, conflicts)
	}
}

func testLeaseExclusive(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if a.Name != "home/h1" || a.Holder != "gw-a" || a.Token == 0 || a.ExpiresAt.IsZero() {
		t.Fatalf("lease %+v", a)
	}
	_, err = s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	WantErr(t, "lock held by another", err, registry.ErrLocked)
	if !strings.Contains(err.Error(), "home/h1") {
		t.Fatalf("error %q does not name the lock", err)
	}
	_, err = s.Lock(ctx, "home/h1", "gw-a", time.Minute)
	WantErr(t, "re-lock by the same holder (not re-entrant)", err, registry.ErrLocked)
	other, err := s.Lock(ctx, "home/h2", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock of another name: %v", err)
	}
	if err := s.Unlock(ctx, a); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	b, err := s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	if b.Token <= a.Token {
		t.Fatalf("token after unlock %d, not above %d", b.Token, a.Token)
	}
	for _, l := range []registry.Lease{b, other} {
		if err := s.Unlock(ctx, l); err != nil {
			t.Fatalf("unlock %s: %v", l.Name, err)
		}
	}
}

func testLeaseRace(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	const contenders = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []registry.Lease
		locked int
		other  []error
	)
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.Lock(ctx, "home/h1", fmt.Sprintf("gw-%d", i), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, l)
			case errors.Is(err, registry.ErrLocked):
				locked++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected lock errors: %v", other)
	}
	if len(won) != 1 || locked != contenders-1 {
		t.Fatalf("%d winners and %d refused, want 1 and %d", len(won), locked, contenders-1)
	}
}

func testLeaseExpiryTakeover(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", 10*time.Second)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	advance(9 * time.Second)
	_, err = s.Lock(ctx, "home/h1", "gw-b", 10*time.Second)
	WantErr(t, "lock before expiry", err, registry.ErrLocked)
	advance(2 * time.Second)
	b, err := s.Lock(ctx, "home/h1", "gw-b", 10*time.Second)
	if err != nil {
		t.Fatalf("take over expired lease: %v", err)
	}
	if b.Token <= a.Token {
		t.Fatalf("takeover token %d, not above %d", b.Token, a.Token)
	}
	if !b.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("takeover lease expires %v, not after the old %v", b.ExpiresAt, a.ExpiresAt)
	}
	// The old holder lost it, and its attempts do not disturb the new one.
	_, err = s.Renew(ctx, a, 10*time.Second)
	WantErr(t, "renew taken-over lease", err, registry.ErrLeaseLost)
	err = s.Unlock(ctx, a)
	WantErr(t, "unlock taken-over lease", err, registry.ErrLeaseLost)
	_, err = s.Lock(ctx, "home/h1", "gw-c", 10*time.Second)
	WantErr(t, "lock held by the new holder", err, registry.ErrLocked)
	if err := s.Unlock(ctx, b); err != nil {
		t.Fatalf("unlock by new holder: %v", err)
	}
}

func testLeaseRenew(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", 10*time.Second)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	advance(8 * time.Second)
	r, err := s.Renew(ctx, a, 10*time.Second)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	if r.Token != a.Token || r.Name != a.Name || r.Holder != a.Holder {
		t.Fatalf("renewed lease %+v does not keep the identity of %+v", r, a)
	}
	if !r.ExpiresAt.After(a.ExpiresAt) {
		t.Fatalf("renewed lease expires %v, not after %v", r.ExpiresAt, a.ExpiresAt)
	}
	advance(8 * time.Second) // past the first expiry, inside the renewed one
	_, err = s.Lock(ctx, "home/h1", "gw-b", 10*time.Second)
	WantErr(t, "lock of a renewed lease", err, registry.ErrLocked)
	if r, err = s.Renew(ctx, r, 10*time.Second); err != nil {
		t.Fatalf("second renew: %v", err)
	}
	if err := s.Unlock(ctx, r); err != nil {
		t.Fatalf("unlock renewed lease: %v", err)
	}
	if _, err := s.Lock(ctx, "home/h1", "gw-b", 10*time.Second); err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
}

func testFencingTokensIncrease(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	var last uint64
	next := func(step string, l registry.Lease) {
		t.Helper()
		if l.Token <= last {
			t.Fatalf("%s: token %d, not above the previous %d", step, l.Token, last)
		}
		last = l.Token
	}
	for i := 0; i < 3; i++ {
		l, err := s.Lock(ctx, "home/h1", "gw-a", time.Minute)
		if err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		next(fmt.Sprintf("lock %d", i), l)
		// Another lock name has its own lease and does not disturb this one.
		o, err := s.Lock(ctx, fmt.Sprintf("home/other-%d", i), "gw-a", time.Minute)
		if err != nil {
			t.Fatalf("lock other %d: %v", i, err)
		}
		if err := s.Unlock(ctx, o); err != nil {
			t.Fatalf("unlock other %d: %v", i, err)
		}
		if err := s.Unlock(ctx, l); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
	l, err := s.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock before expiry: %v", err)
	}
	next("lock before expiry", l)
	advance(2 * time.Minute)
	l, err = s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	next("takeover after expiry", l)
	advance(2 * time.Minute)
	l, err = s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("same holder after its own expiry: %v", err)
	}
	next("same holder after its own expiry", l)
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatalf("final unlock: %v", err)
	}
	l, err = s.Lock(ctx, "home/h1", "gw-c", time.Minute)
	if err != nil {
		t.Fatalf("lock after final unlock: %v", err)
	}
	next("lock after final unlock", l)
}

func testLostLease(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", 10*time.Second)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}

	forged := a
	forged.Token++
	_, err = s.Renew(ctx, forged, time.Minute)
	WantErr(t, "renew with wrong token", err, registry.ErrLeaseLost)
	err = s.Unlock(ctx, forged)
	WantErr(t, "unlock with wrong token", err, registry.ErrLeaseLost)
	forged = a
	forged.Holder = "gw-b"
	_, err = s.Renew(ctx, forged, time.Minute)
	WantErr(t, "renew with wrong holder", err, registry.ErrLeaseLost)
	err = s.Unlock(ctx, forged)
	WantErr(t, "unlock with wrong holder", err, registry.ErrLeaseLost)
	if !strings.Contains(err.Error(), "home/h1") {
		t.Fatalf("error %q does not name the lock", err)
	}
	_, err = s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	WantErr(t, "lock after refused unlocks", err, registry.ErrLocked)

	// An expired lease is lost even when nobody took it over.
	advance(11 * time.Second)
	_, err = s.Renew(ctx, a, time.Minute)
	WantErr(t, "renew expired lease", err, registry.ErrLeaseLost)
	err = s.Unlock(ctx, a)
	WantErr(t, "unlock expired lease", err, registry.ErrLeaseLost)

	// Unlocking twice: the second finds nothing to release.
	b, err := s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock after expiry: %v", err)
	}
	if err := s.Unlock(ctx, b); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	err = s.Unlock(ctx, b)
	WantErr(t, "unlock twice", err, registry.ErrLeaseLost)
	_, err = s.Renew(ctx, b, time.Minute)
	WantErr(t, "renew released lease", err, registry.ErrLeaseLost)
	_, err = s.Renew(ctx, registry.Lease{Name: "never", Holder: "gw-a", Token: 1}, time.Minute)
	WantErr(t, "renew lock never taken", err, registry.ErrLeaseLost)
}

func testLockArguments(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, holder string
		ttl          time.Duration
	}{
		{"", "gw-a", time.Minute},
		{"home/h1", "", time.Minute},
		{"home/h1", "gw-a", 0},
		{"home/h1", "gw-a", -time.Second},
	} {
		if _, err := s.Lock(ctx, c.name, c.holder, c.ttl); err == nil {
			t.Fatalf("Lock(%q, %q, %s) succeeded", c.name, c.holder, c.ttl)
		}
	}
	l, err := s.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock after refused arguments: %v", err)
	}
	if _, err := s.Renew(ctx, l, 0); err == nil {
		t.Fatal("Renew with zero ttl succeeded")
	}
}

func testSessionsSumAndReplace(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	want := func(step, home string, n int) {
		t.Helper()
		got, err := s.FleetSessions(ctx, home)
		if err != nil {
			t.Fatalf("%s: fleet sessions of %s: %v", step, home, err)
		}
		if got != n {
			t.Fatalf("%s: fleet sessions of %s = %d, want %d", step, home, got, n)
		}
	}
	want("empty store", "h1", 0)
	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 2, "h2": 1}, time.Minute); err != nil {
		t.Fatalf("report a: %v", err)
	}
	if err := s.ReportSessions(ctx, "gw-b", map[string]int{"h1": 3, "h3": 0}, time.Minute); err != nil {
		t.Fatalf("report b: %v", err)
	}
	want("two reports", "h1", 5)
	want("two reports", "h2", 1)
	want("two reports", "h3", 0)
	want("two reports", "h9", 0)

	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, time.Minute); err != nil {
		t.Fatalf("replace a: %v", err)
	}
	want("after replacing a", "h1", 4)
	want("after replacing a", "h2", 0)

	if err := s.ReportSessions(ctx, "gw-b", map[string]int{"h1": 0}, time.Minute); err != nil {
		t.Fatalf("zero b: %v", err)
	}
	want("after b reports zero", "h1", 1)
	if err := s.ReportSessions(ctx, "gw-a", nil, time.Minute); err != nil {
		t.Fatalf("empty report a: %v", err)
	}
	want("after a reports nothing", "h1", 0)
}

func testSessionsExpire(t *testing.T, open Opener) {
	s, advance := open(t)
	ctx := context.Background()
	fleet := func(home string) int {
		t.Helper()
		n, err := s.FleetSessions(ctx, home)
		if err != nil {
			t.Fatalf("fleet sessions of %s: %v", home, err)
		}
		return n
	}
	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 2}, 10*time.Second); err != nil {
		t.Fatalf("report a: %v", err)
	}
	if err := s.ReportSessions(ctx, "gw-b", map[string]int{"h1": 3}, 30*time.Second); err != nil {
		t.Fatalf("report b: %v", err)
	}
	advance(9 * time.Second)
	if n := fleet("h1"); n != 5 {
		t.Fatalf("before any expiry: %d, want 5", n)
	}
	advance(2 * time.Second)
	if n := fleet("h1"); n != 3 {
		t.Fatalf("after a's report expired: %d, want 3", n)
	}
	// A fresh report from a counts again, with its own ttl.
	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, 30*time.Second); err != nil {
		t.Fatalf("report a again: %v", err)
	}
	if n := fleet("h1"); n != 4 {
		t.Fatalf("after a reported again: %d, want 4", n)
	}
	advance(20 * time.Second) // b expires at 30 s, a at 41 s
	if n := fleet("h1"); n != 1 {
		t.Fatalf("after b's report expired: %d, want 1", n)
	}
	advance(time.Hour)
	if n := fleet("h1"); n != 0 {
		t.Fatalf("after every report expired: %d, want 0", n)
	}
}

func testSessionsArguments(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	if err := s.ReportSessions(ctx, "", map[string]int{"h1": 1}, time.Minute); err == nil {
		t.Fatal("report without instance succeeded")
	}
	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, 0); err == nil {
		t.Fatal("report with zero ttl succeeded")
	}
	if err := s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1, "h2": -1}, time.Minute); err == nil {
		t.Fatal("report with a negative count succeeded")
	}
	n, err := s.FleetSessions(ctx, "h1")
	if err != nil || n != 0 {
		t.Fatalf("after refused reports: %d, %v; want 0", n, err)
	}
}

// wantCancelled fails t unless err is context.Canceled.
func wantCancelled(t *testing.T, call string, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%s with a cancelled context: got %v, want context.Canceled", call, err)
	}
}

func testCancelledContext(t *testing.T, open Opener) {
	s, _ := open(t)
	live := context.Background()
	h1 := mustCreateHome(t, s, SampleHome("h1"))
	held, err := s.Lock(live, "home/held", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}

	ctx, cancel := context.WithCancel(live)
	cancel()
	check := func(call string, err error) { t.Helper(); wantCancelled(t, call, err) }
	_, err = s.GetHome(ctx, "h1")
	check("GetHome", err)
	_, err = s.ListHomes(ctx)
	check("ListHomes", err)
	_, err = s.PutHome(ctx, SampleHome("h2"), registry.Cond{})
	check("PutHome", err)
	next := h1
	next.Version = "v2"
	_, err = s.PutHome(ctx, next, registry.CondOf(h1))
	check("PutHome update", err)
	check("DeleteHome", s.DeleteHome(ctx, "h1", registry.CondOf(h1)))
	_, err = s.GetTarget(ctx)
	check("GetTarget", err)
	_, err = s.PutTarget(ctx, registry.Target{Version: "v1"}, registry.Cond{})
	check("PutTarget", err)
	_, err = s.Lock(ctx, "home/free", "gw-a", time.Minute)
	check("Lock", err)
	_, err = s.Renew(ctx, held, time.Minute)
	check("Renew", err)
	check("Unlock", s.Unlock(ctx, held))
	check("ReportSessions", s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, time.Minute))
	_, err = s.FleetSessions(ctx, "h1")
	check("FleetSessions", err)

	deadline, cancelDeadline := context.WithDeadline(live, time.Unix(0, 0))
	defer cancelDeadline()
	_, err = s.GetHome(deadline, "h1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetHome past its deadline: got %v, want context.DeadlineExceeded", err)
	}

	// Nothing was written by the cancelled calls.
	_, err = s.GetHome(live, "h2")
	WantErr(t, "home created with a cancelled context", err, registry.ErrNotFound)
	got, err := s.GetHome(live, "h1")
	if err != nil || got.Generation != h1.Generation || got.Version != h1.Version {
		t.Fatalf("h1 after cancelled writes: %+v, %v", got, err)
	}
	_, err = s.GetTarget(live)
	WantErr(t, "target set with a cancelled context", err, registry.ErrNotFound)
	if n, err := s.FleetSessions(live, "h1"); err != nil || n != 0 {
		t.Fatalf("sessions after cancelled report: %d, %v", n, err)
	}
	free, err := s.Lock(live, "home/free", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock not taken by the cancelled call: %v", err)
	}
	_, err = s.Lock(live, "home/held", "gw-b", time.Minute)
	WantErr(t, "lock released by a cancelled unlock", err, registry.ErrLocked)
	// A cancelled caller frees its lease with context.WithoutCancel.
	if err := s.Unlock(context.WithoutCancel(ctx), held); err != nil {
		t.Fatalf("unlock with WithoutCancel: %v", err)
	}
	if err := s.Unlock(live, free); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}
