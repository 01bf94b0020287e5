package sessions

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock for Table.now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func newTestSessions() (*Table, *fakeClock) {
	clk := &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := New()
	s.now = clk.Now
	return s, clk
}

func TestSessionsBeginEnd(t *testing.T) {
	s, _ := newTestSessions()
	if n := s.Count("h"); n != 0 {
		t.Fatalf("Count of an unknown home = %d", n)
	}
	a, b := s.Begin("h"), s.Begin("h")
	other := s.Begin("other")
	if n := s.Count("h"); n != 2 {
		t.Fatalf("Count = %d after two Begin; want 2", n)
	}
	s.End(a)
	if n := s.Count("h"); n != 1 {
		t.Fatalf("Count = %d after one End; want 1", n)
	}
	s.End(b)
	s.End(b) // a second End of the same counter must not go below zero
	s.End(a)
	if n := s.Count("h"); n != 0 {
		t.Fatalf("Count = %d after extra Ends; want 0", n)
	}
	if n := s.Count("other"); n != 1 {
		t.Fatalf("Count(other) = %d; want 1 (homes are separate)", n)
	}
	// After extra Ends a new session still counts as one.
	c := s.Begin("h")
	if n := s.Count("h"); n != 1 {
		t.Fatalf("Count = %d after Begin following extra Ends; want 1", n)
	}
	s.End(c)
	s.End(other)
	if snap := s.Snapshot(); len(snap) != 0 {
		t.Fatalf("Snapshot = %v; want empty", snap)
	}
}

func TestSessionsEmptyIDAndNilCounter(t *testing.T) {
	s, _ := newTestSessions()
	if c := s.Begin(""); c != nil {
		t.Fatalf("Begin(\"\") = %v; want nil", c)
	}
	s.End(nil) // must not panic
	if n := s.Count(""); n != 0 {
		t.Fatalf("Count(\"\") = %d", n)
	}
}

func TestSessionsIdleSince(t *testing.T) {
	s, clk := newTestSessions()
	if got := s.IdleSince("never"); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("IdleSince of a home never seen = %v; want the epoch", got)
	}
	t0 := clk.Now()
	c1 := s.Begin("h")
	if got := s.IdleSince("h"); !got.IsZero() {
		t.Fatalf("IdleSince with a session = %v; want the zero time", got)
	}
	clk.Advance(time.Second)
	c2 := s.Begin("h")
	clk.Advance(time.Second)
	s.End(c1)
	if got := s.IdleSince("h"); !got.IsZero() {
		t.Fatalf("IdleSince with one session left = %v; want the zero time", got)
	}
	t3 := clk.Advance(time.Second)
	s.End(c2)
	clk.Advance(time.Minute)
	if got := s.IdleSince("h"); !got.Equal(t3) {
		t.Fatalf("IdleSince = %v; want %v, when the last session ended (began %v)", got, t3, t0)
	}
	// An extra End does not move the idle time.
	clk.Advance(time.Second)
	s.End(c2)
	if got := s.IdleSince("h"); !got.Equal(t3) {
		t.Fatalf("IdleSince after an extra End = %v; want %v", got, t3)
	}
	// Touch marks the home active now without counting a session.
	t4 := clk.Advance(time.Second)
	s.Touch("h")
	if n := s.Count("h"); n != 0 {
		t.Fatalf("Count after Touch = %d; want 0", n)
	}
	if got := s.IdleSince("h"); !got.Equal(t4) {
		t.Fatalf("IdleSince after Touch = %v; want %v", got, t4)
	}
}

func TestSessionsLeaseCountedUntilExpiry(t *testing.T) {
	s, clk := newTestSessions()
	start := clk.Now()
	s.Lease("h", 10*time.Second)
	if n := s.Count("h"); n != 1 {
		t.Fatalf("Count with a lease = %d; want 1", n)
	}
	if snap := s.Snapshot(); snap["h"] != 1 {
		t.Fatalf("Snapshot = %v; want h:1", snap)
	}
	clk.Advance(9 * time.Second)
	if n := s.Count("h"); n != 1 {
		t.Fatalf("Count 1s before expiry = %d; want 1", n)
	}
	if got := s.IdleSince("h"); !got.IsZero() {
		t.Fatalf("IdleSince under a lease = %v; want zero", got)
	}
	clk.Advance(time.Second)
	if n := s.Count("h"); n != 0 {
		t.Fatalf("Count at expiry = %d; want 0", n)
	}
	clk.Advance(time.Minute)
	if got, want := s.IdleSince("h"), start.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("IdleSince after the lease expired = %v; want its expiry %v", got, want)
	}
}

func TestSessionsEndLease(t *testing.T) {
	s, clk := newTestSessions()
	l1 := s.Lease("h", time.Minute)
	l2 := s.Lease("h", time.Minute)
	if l1 == l2 {
		t.Fatalf("two leases share id %d", l1)
	}
	if n := s.Count("h"); n != 2 {
		t.Fatalf("Count = %d; want 2", n)
	}
	clk.Advance(time.Second)
	if !s.EndLease("h", l1) {
		t.Fatal("EndLease of a live lease reported false")
	}
	if s.EndLease("h", l1) {
		t.Fatal("EndLease of an ended lease reported true")
	}
	if n := s.Count("h"); n != 1 {
		t.Fatalf("Count = %d after one EndLease; want 1", n)
	}
	t2 := clk.Advance(time.Second)
	if !s.EndLease("h", l2) {
		t.Fatal("EndLease of the second live lease reported false")
	}
	if got := s.IdleSince("h"); !got.Equal(t2) {
		t.Fatalf("IdleSince = %v; want %v, when the last lease ended", got, t2)
	}
	// A lease ended after it expired reports false and leaves the home
	// idle since its expiry, not since the late EndLease.
	l3 := s.Lease("h", time.Second)
	exp := clk.Now().Add(time.Second)
	clk.Advance(time.Hour)
	if s.EndLease("h", l3) {
		t.Fatal("EndLease of an expired lease reported true")
	}
	if got := s.IdleSince("h"); !got.Equal(exp) {
		t.Fatalf("IdleSince = %v; want the lease's expiry %v", got, exp)
	}
	// Ending a lease of a home never seen creates nothing.
	if s.EndLease("ghost", 1) {
		t.Fatal("EndLease of an unknown home reported true")
	}
	if got := s.IdleSince("ghost"); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("IdleSince(ghost) = %v; want the epoch", got)
	}
}

func TestSessionsLeaseAndRequestTogether(t *testing.T) {
	s, clk := newTestSessions()
	c := s.Begin("h")
	s.Lease("h", 5*time.Second)
	if n := s.Count("h"); n != 2 {
		t.Fatalf("Count = %d; want 2", n)
	}
	clk.Advance(time.Second)
	s.End(c) // the lease still holds the home
	if got := s.IdleSince("h"); !got.IsZero() {
		t.Fatalf("IdleSince under a lease = %v; want zero", got)
	}
	clk.Advance(time.Hour)
	want := clk.Now().Add(-time.Hour).Add(4 * time.Second)
	if got := s.IdleSince("h"); !got.Equal(want) {
		t.Fatalf("IdleSince = %v; want the lease's expiry %v", got, want)
	}
}

func TestSessionsConcurrentNeverNegative(t *testing.T) {
	s := New()
	const workers, rounds = 100, 200
	homes := []string{"a", "b", "c"}
	var negative atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, h := range homes {
				if n := s.Count(h); n < 0 {
					negative.Store(int64(n))
				}
				if n := rawCount(s, h); n < 0 {
					negative.Store(n)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := homes[w%len(homes)]
			for i := range rounds {
				c := s.Begin(h)
				if i%10 == 0 {
					l := s.Lease(h, time.Hour)
					s.EndLease(h, l)
				}
				s.End(c)
				if i%50 == 0 {
					s.End(c) // a stray extra End must never drive the count negative
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if n := negative.Load(); n != 0 {
		t.Fatalf("a count went negative: %d", n)
	}
	for _, h := range homes {
		if n := s.Count(h); n != 0 {
			t.Errorf("Count(%s) = %d after every session ended; want 0", h, n)
		}
		if got := s.IdleSince(h); got.IsZero() {
			t.Errorf("IdleSince(%s) is zero with no session", h)
		}
	}
}

// rawCount returns the request counter of home id without leases (0 for
// none).
func rawCount(s *Table, id string) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c := s.homes[id]; c != nil {
		return c.n.Load()
	}
	return 0
}
