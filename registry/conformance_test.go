package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// storeOpener opens a fresh, empty Store for one test and returns with it
// advance, which moves the clock that drives the store's lease and
// session-report expiry forward by d. The opener registers the store's Close
// with t.Cleanup.
type storeOpener func(t *testing.T) (s Store, advance func(d time.Duration))

// fakeClock is a manual clock for stores that take a Now function.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// newFakeClock returns a clock standing at a fixed instant.
func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// Now returns the clock's current time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// runStoreConformance runs the behaviour every Store implementation must
// show, each case on a store of its own from open.
func runStoreConformance(t *testing.T, open storeOpener) {
	cases := []struct {
		name string
		run  func(t *testing.T, open storeOpener)
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
		{"AppCreateAndGet", testRuntimeAppCreateAndGet},
		{"AppCAS", testRuntimeAppCAS},
		{"AppListAndDelete", testRuntimeAppListAndDelete},
		{"AppCancelledContext", testRuntimeAppCancelledContext},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open) })
	}
}

// sampleHome returns a home with every field set.
func sampleHome(id string) Home {
	at := time.Date(2029, 12, 31, 23, 0, 0, 123456789, time.UTC)
	return Home{
		ID:              id,
		Target:          "user-" + id,
		Provider:        "exec",
		ProviderRef:     "pid=42",
		Endpoint:        "http://127.0.0.1:40123",
		RelayTokenRef:   "env:RELAY_" + id,
		Version:         "v1",
		Status:          StatusRunning,
		Verdict:         VerdictHealthy,
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
func mustCreateHome(t *testing.T, s Store, h Home) Home {
	t.Helper()
	got, err := s.PutHome(context.Background(), h, Cond{})
	if err != nil {
		t.Fatalf("create home %s: %v", h.ID, err)
	}
	return got
}

// targetCond returns the condition that matches t as it was read.
func targetCond(t Target) Cond { return Cond{Generation: t.Generation, Owner: t.Owner} }

// sameHome reports how a and b differ, or "" when they are equal (times are
// compared as instants).
func sameHome(a, b Home) string {
	if !a.LastWakeAt.Equal(b.LastWakeAt) || !a.LastReadyAt.Equal(b.LastReadyAt) {
		return fmt.Sprintf("times differ: %v/%v vs %v/%v", a.LastWakeAt, a.LastReadyAt, b.LastWakeAt, b.LastReadyAt)
	}
	a.LastWakeAt, a.LastReadyAt, b.LastWakeAt, b.LastReadyAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if a != b {
		return fmt.Sprintf("%+v vs %+v", a, b)
	}
	return ""
}

// wantErr fails t unless err matches want (and none of the other sentinels).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	for _, other := range []error{ErrNotFound, ErrConflict, ErrLocked, ErrLeaseLost} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%s: error %v also matches %v", what, err, other)
		}
	}
}

func testHomeCreateAndGet(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	in := sampleHome("h1")
	in.Generation = 99 // ignored: the store sets it
	stored, err := s.PutHome(ctx, in, Cond{})
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
	want := sampleHome("h1")
	want.Generation = 1
	if d := sameHome(got, want); d != "" {
		t.Fatalf("read back: %s", d)
	}
	if d := sameHome(got, stored); d != "" {
		t.Fatalf("returned record differs from stored one: %s", d)
	}
}

func testHomeCASSuccess(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, sampleHome("h1"))
	for i := 2; i <= 4; i++ {
		next := h
		next.Version = fmt.Sprintf("v%d", i)
		next.Owner = fmt.Sprintf("lease-%d", i)
		got, err := s.PutHome(ctx, next, CondOf(h))
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
		if d := sameHome(read, got); d != "" {
			t.Fatalf("after update %d: %s", i, d)
		}
		h = read
	}
}

func testHomeStaleGeneration(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, sampleHome("h1"))
	v2 := v1
	v2.Version = "v2"
	v2, err := s.PutHome(ctx, v2, CondOf(v1))
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	stale := v1
	stale.Version = "stale"
	_, err = s.PutHome(ctx, stale, CondOf(v1))
	wantErr(t, "write with stale generation", err, ErrConflict)
	if !strings.Contains(err.Error(), "h1") {
		t.Fatalf("error %q does not name the home", err)
	}
	ahead := Cond{Generation: v2.Generation + 1, Owner: v2.Owner}
	_, err = s.PutHome(ctx, stale, ahead)
	wantErr(t, "write with future generation", err, ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := sameHome(got, v2); d != "" {
		t.Fatalf("conflicting write changed the record: %s", d)
	}
}

func testHomeWrongOwner(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, sampleHome("h1"))
	next := v1
	next.Version = "v2"
	_, err := s.PutHome(ctx, next, Cond{Generation: v1.Generation, Owner: "gw-b"})
	wantErr(t, "write with wrong owner", err, ErrConflict)
	_, err = s.PutHome(ctx, next, Cond{Generation: v1.Generation})
	wantErr(t, "write with empty owner", err, ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := sameHome(got, v1); d != "" {
		t.Fatalf("conflicting write changed the record: %s", d)
	}
}

func testHomeCreateOnExisting(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, sampleHome("h1"))
	again := sampleHome("h1")
	again.Version = "other"
	_, err := s.PutHome(ctx, again, Cond{})
	wantErr(t, "create over existing home", err, ErrConflict)
	_, err = s.PutHome(ctx, again, Cond{Owner: v1.Owner})
	wantErr(t, "create over existing home with its owner", err, ErrConflict)
	got, err := s.GetHome(ctx, "h1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if d := sameHome(got, v1); d != "" {
		t.Fatalf("failed create changed the record: %s", d)
	}
}

func testHomeValidation(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	noID := sampleHome("")
	noID.Target = "alice"
	_, err := s.PutHome(ctx, noID, Cond{})
	if err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("home without id: got %v, want an error naming the id", err)
	}
	noTarget := sampleHome("h1")
	noTarget.Target = ""
	_, err = s.PutHome(ctx, noTarget, Cond{})
	if err == nil || !strings.Contains(err.Error(), "target") {
		t.Fatalf("home without target: got %v, want an error naming the target", err)
	}
	for _, sentinel := range []error{ErrNotFound, ErrConflict} {
		if errors.Is(err, sentinel) {
			t.Fatalf("validation error %v matches %v", err, sentinel)
		}
	}
	_, err = s.GetHome(ctx, "h1")
	wantErr(t, "get after rejected write", err, ErrNotFound)
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 0 {
		t.Fatalf("list after rejected writes: %d homes, %v", len(homes), err)
	}
}

func testNotFoundIsDistinct(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	_, err := s.GetHome(ctx, "ghost")
	wantErr(t, "get missing home", err, ErrNotFound)
	if !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("error %q does not name the home", err)
	}
	err = s.DeleteHome(ctx, "ghost", Cond{Generation: 1})
	wantErr(t, "delete missing home", err, ErrNotFound)
	h := sampleHome("ghost")
	_, err = s.PutHome(ctx, h, Cond{Generation: 3, Owner: h.Owner})
	wantErr(t, "update missing home", err, ErrNotFound)
	_, err = s.GetTarget(ctx)
	wantErr(t, "get unset target", err, ErrNotFound)
	_, err = s.PutTarget(ctx, Target{Version: "v1"}, Cond{Generation: 1})
	wantErr(t, "update unset target", err, ErrNotFound)

	// A conflict on an existing record is not a not-found.
	v1 := mustCreateHome(t, s, sampleHome("h1"))
	_, err = s.PutHome(ctx, v1, Cond{Generation: 7, Owner: v1.Owner})
	wantErr(t, "update with wrong generation", err, ErrConflict)
}

func testListHomesOrdered(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 0 {
		t.Fatalf("empty store lists %d homes, %v", len(homes), err)
	}
	for _, id := range []string{"h3", "a10", "h1", "a2", "b"} {
		mustCreateHome(t, s, sampleHome(id))
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

func testDeleteHome(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	v1 := mustCreateHome(t, s, sampleHome("h1"))
	mustCreateHome(t, s, sampleHome("h2"))
	err := s.DeleteHome(ctx, "h1", Cond{Generation: v1.Generation + 1, Owner: v1.Owner})
	wantErr(t, "delete with wrong generation", err, ErrConflict)
	err = s.DeleteHome(ctx, "h1", Cond{Generation: v1.Generation, Owner: "gw-b"})
	wantErr(t, "delete with wrong owner", err, ErrConflict)
	err = s.DeleteHome(ctx, "h1", Cond{})
	wantErr(t, "delete with create condition", err, ErrConflict)
	if _, err := s.GetHome(ctx, "h1"); err != nil {
		t.Fatalf("home gone after refused deletes: %v", err)
	}
	if err := s.DeleteHome(ctx, "h1", CondOf(v1)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.GetHome(ctx, "h1")
	wantErr(t, "get deleted home", err, ErrNotFound)
	err = s.DeleteHome(ctx, "h1", CondOf(v1))
	wantErr(t, "delete twice", err, ErrNotFound)
	homes, err := s.ListHomes(ctx)
	if err != nil || len(homes) != 1 || homes[0].ID != "h2" {
		t.Fatalf("after delete: %+v, %v; want only h2", homes, err)
	}
	// The id can be created afresh.
	again, err := s.PutHome(ctx, sampleHome("h1"), Cond{})
	if err != nil || again.Generation != 1 {
		t.Fatalf("re-create deleted home: generation %d, %v", again.Generation, err)
	}
}

func testTargetCAS(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := Target{Version: "v1", Image: "img:v1", Command: []string{"home", "--port", "{port}"}, UpdatedAt: at, Owner: "gw-a"}
	v1, err := s.PutTarget(ctx, in, Cond{})
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

	_, err = s.PutTarget(ctx, in, Cond{})
	wantErr(t, "create target twice", err, ErrConflict)

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
	_, err = s.PutTarget(ctx, Target{Version: "v3"}, targetCond(got))
	wantErr(t, "target write with stale generation", err, ErrConflict)
	_, err = s.PutTarget(ctx, Target{Version: "v3"}, Cond{Generation: 2, Owner: "gw-a"})
	wantErr(t, "target write with wrong owner", err, ErrConflict)
	got, err = s.GetTarget(ctx)
	if err != nil || got.Version != "v1" || got.BadVersion != "v1" || got.Generation != 2 {
		t.Fatalf("target after refused writes: %+v, %v", got, err)
	}
}

func testConcurrentCASIncrements(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	start := sampleHome("h1")
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
				_, err = s.PutHome(ctx, next, CondOf(cur))
				mu.Lock()
				switch {
				case err == nil:
					successes++
				case errors.Is(err, ErrConflict):
					conflicts++
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
				if !errors.Is(err, ErrConflict) {
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

func testLeaseExclusive(t *testing.T, open storeOpener) {
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
	wantErr(t, "lock held by another", err, ErrLocked)
	if !strings.Contains(err.Error(), "home/h1") {
		t.Fatalf("error %q does not name the lock", err)
	}
	_, err = s.Lock(ctx, "home/h1", "gw-a", time.Minute)
	wantErr(t, "re-lock by the same holder (not re-entrant)", err, ErrLocked)
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
	for _, l := range []Lease{b, other} {
		if err := s.Unlock(ctx, l); err != nil {
			t.Fatalf("unlock %s: %v", l.Name, err)
		}
	}
}

func testLeaseRace(t *testing.T, open storeOpener) {
	s, _ := open(t)
	ctx := context.Background()
	const contenders = 20
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []Lease
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
			case errors.Is(err, ErrLocked):
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

func testLeaseExpiryTakeover(t *testing.T, open storeOpener) {
	s, advance := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", 10*time.Second)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	advance(9 * time.Second)
	_, err = s.Lock(ctx, "home/h1", "gw-b", 10*time.Second)
	wantErr(t, "lock before expiry", err, ErrLocked)
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
	wantErr(t, "renew taken-over lease", err, ErrLeaseLost)
	err = s.Unlock(ctx, a)
	wantErr(t, "unlock taken-over lease", err, ErrLeaseLost)
	_, err = s.Lock(ctx, "home/h1", "gw-c", 10*time.Second)
	wantErr(t, "lock held by the new holder", err, ErrLocked)
	if err := s.Unlock(ctx, b); err != nil {
		t.Fatalf("unlock by new holder: %v", err)
	}
}

func testLeaseRenew(t *testing.T, open storeOpener) {
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
	wantErr(t, "lock of a renewed lease", err, ErrLocked)
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

func testFencingTokensIncrease(t *testing.T, open storeOpener) {
	s, advance := open(t)
	ctx := context.Background()
	var last uint64
	next := func(step string, l Lease) {
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

func testLostLease(t *testing.T, open storeOpener) {
	s, advance := open(t)
	ctx := context.Background()
	a, err := s.Lock(ctx, "home/h1", "gw-a", 10*time.Second)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}

	forged := a
	forged.Token++
	_, err = s.Renew(ctx, forged, time.Minute)
	wantErr(t, "renew with wrong token", err, ErrLeaseLost)
	err = s.Unlock(ctx, forged)
	wantErr(t, "unlock with wrong token", err, ErrLeaseLost)
	forged = a
	forged.Holder = "gw-b"
	_, err = s.Renew(ctx, forged, time.Minute)
	wantErr(t, "renew with wrong holder", err, ErrLeaseLost)
	err = s.Unlock(ctx, forged)
	wantErr(t, "unlock with wrong holder", err, ErrLeaseLost)
	if !strings.Contains(err.Error(), "home/h1") {
		t.Fatalf("error %q does not name the lock", err)
	}
	_, err = s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	wantErr(t, "lock after refused unlocks", err, ErrLocked)

	// An expired lease is lost even when nobody took it over.
	advance(11 * time.Second)
	_, err = s.Renew(ctx, a, time.Minute)
	wantErr(t, "renew expired lease", err, ErrLeaseLost)
	err = s.Unlock(ctx, a)
	wantErr(t, "unlock expired lease", err, ErrLeaseLost)

	// Unlocking twice: the second finds nothing to release.
	b, err := s.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock after expiry: %v", err)
	}
	if err := s.Unlock(ctx, b); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	err = s.Unlock(ctx, b)
	wantErr(t, "unlock twice", err, ErrLeaseLost)
	_, err = s.Renew(ctx, b, time.Minute)
	wantErr(t, "renew released lease", err, ErrLeaseLost)
	_, err = s.Renew(ctx, Lease{Name: "never", Holder: "gw-a", Token: 1}, time.Minute)
	wantErr(t, "renew lock never taken", err, ErrLeaseLost)
}

func testLockArguments(t *testing.T, open storeOpener) {
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

func testSessionsSumAndReplace(t *testing.T, open storeOpener) {
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

func testSessionsExpire(t *testing.T, open storeOpener) {
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

func testSessionsArguments(t *testing.T, open storeOpener) {
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

func testCancelledContext(t *testing.T, open storeOpener) {
	s, _ := open(t)
	live := context.Background()
	h1 := mustCreateHome(t, s, sampleHome("h1"))
	held, err := s.Lock(live, "home/held", "gw-a", time.Minute)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}

	ctx, cancel := context.WithCancel(live)
	cancel()
	check := func(call string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: got %v, want context.Canceled", call, err)
		}
	}
	_, err = s.GetHome(ctx, "h1")
	check("GetHome", err)
	_, err = s.ListHomes(ctx)
	check("ListHomes", err)
	_, err = s.PutHome(ctx, sampleHome("h2"), Cond{})
	check("PutHome", err)
	next := h1
	next.Version = "v2"
	_, err = s.PutHome(ctx, next, CondOf(h1))
	check("PutHome update", err)
	check("DeleteHome", s.DeleteHome(ctx, "h1", CondOf(h1)))
	_, err = s.GetTarget(ctx)
	check("GetTarget", err)
	_, err = s.PutTarget(ctx, Target{Version: "v1"}, Cond{})
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
	wantErr(t, "home created with a cancelled context", err, ErrNotFound)
	got, err := s.GetHome(live, "h1")
	if err != nil || got.Generation != h1.Generation || got.Version != h1.Version {
		t.Fatalf("h1 after cancelled writes: %+v, %v", got, err)
	}
	_, err = s.GetTarget(live)
	wantErr(t, "target set with a cancelled context", err, ErrNotFound)
	if n, err := s.FleetSessions(live, "h1"); err != nil || n != 0 {
		t.Fatalf("sessions after cancelled report: %d, %v", n, err)
	}
	free, err := s.Lock(live, "home/free", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock not taken by the cancelled call: %v", err)
	}
	_, err = s.Lock(live, "home/held", "gw-b", time.Minute)
	wantErr(t, "lock released by a cancelled unlock", err, ErrLocked)
	// A cancelled caller frees its lease with context.WithoutCancel.
	if err := s.Unlock(context.WithoutCancel(ctx), held); err != nil {
		t.Fatalf("unlock with WithoutCancel: %v", err)
	}
	if err := s.Unlock(live, free); err != nil {
		t.Fatalf("unlock: %v", err)
	}
}
