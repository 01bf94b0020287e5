package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A lease taken by a gateway with a live heartbeat dies with that
// heartbeat: another gateway takes it as soon as the holder's session
// report lapses, long before the lease's own ttl.
func TestRedisLockDiesWithHeartbeat(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clk := registrytest.NewClock()
	r := openTestRedis(t, srv, "beat", clk.Now)
	ctx := context.Background()
	for _, gw := range []string{"gw-a", "gw-b"} {
		if err := r.ReportSessions(ctx, gw, nil, 4*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	a, err := r.Lock(ctx, "home/h1", "gw-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	if err := r.ReportSessions(ctx, "gw-b", nil, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lock(ctx, "home/h1", "gw-b", time.Minute); !errors.Is(err, registry.ErrLocked) {
		t.Fatalf("lock while the holder's heartbeat lives: %v, want ErrLocked", err)
	}
	// gw-a renews its lease but not its heartbeat (it died, or was cut off).
	if a, err = r.Renew(ctx, a, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	clk.Advance(1500 * time.Millisecond)
	b, err := r.Lock(ctx, "home/h1", "gw-b", time.Minute)
	if err != nil {
		t.Fatalf("lock after the holder's heartbeat lapsed (its lease has 58s left): %v", err)
	}
	if b.Token <= a.Token {
		t.Fatalf("takeover token %d, not above %d", b.Token, a.Token)
	}
	if _, err := r.Renew(ctx, a, time.Minute); !errors.Is(err, registry.ErrLeaseLost) {
		t.Fatalf("renew by the dead holder: %v, want ErrLeaseLost", err)
	}
	// A holder that reports no heartbeat keeps a plain lease.
	if err := r.Unlock(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lock(ctx, "home/h2", "tool", time.Minute); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	if err := r.ReportSessions(ctx, "gw-b", nil, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lock(ctx, "home/h2", "gw-b", time.Minute); !errors.Is(err, registry.ErrLocked) {
		t.Fatalf("lock of a plain lease before its ttl: %v, want ErrLocked", err)
	}
}

// A lock command the client gave up on (the server was paused) and that
// the server runs late is undone by the client once the server answers:
// the lock is free again at once, not after the lease's minute.
func TestRedisUnansweredLockIsUndone(t *testing.T) {
	srv := registrytest.StartRedis(t)
	r := openTestRedis(t, srv, "late", nil)
	other := openTestRedis(t, srv, "late", nil)
	// The server knows the script, as a serving fleet's does: a late
	// EVALSHA of an unknown script would do nothing.
	warm, err := r.Lock(context.Background(), "home/h0", "gw-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Unlock(context.Background(), warm); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = r.Lock(ctx, "home/h1", "gw-a", time.Minute)
	cancel()
	if err == nil {
		t.Fatal("lock answered while the server was paused")
	}
	srv.Resume()
	paused = false
	resumed := time.Now()
	var took time.Duration
	// The cleanup is the first client's own and says nothing when done:
	// try the lock until it is free.
	testbin.Eventually(t, "the lock taken late by the server to be freed after the pause", func() bool {
		l, err := other.Lock(context.Background(), "home/h1", "gw-b", time.Minute)
		if err == nil {
			took = time.Since(resumed)
			_ = other.Unlock(context.Background(), l)
			return true
		}
		if !errors.Is(err, registry.ErrLocked) {
			t.Fatalf("lock after the pause: %v", err)
		}
		return false
	})
	t.Logf("the lock was free %s after the server answered again", took.Round(time.Millisecond))
}

// A gateway that starts again under its instance name frees the leases
// its earlier run left: bound to a heartbeat that the new run keeps alive
// under the same name, they would otherwise hold for their whole ttl.
// Another holder's leases stay.
func TestRedisReleaseLeasesOfAnEarlierRun(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clk := registrytest.NewClock()
	r := openTestRedis(t, srv, "rerun", clk.Now)
	ctx := context.Background()
	for _, gw := range []string{"gw-0", "gw-1"} {
		if err := r.ReportSessions(ctx, gw, nil, 4*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	old, err := r.Lock(ctx, "home/h1", "gw-0", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lock(ctx, "home/h2", "gw-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	other, err := r.Lock(ctx, "home/h3", "gw-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// gw-0 is killed and starts again: its new run reports under the
	// same name, which keeps the old leases alive.
	clk.Advance(3 * time.Second)
	for _, gw := range []string{"gw-0", "gw-1"} {
		if err := r.ReportSessions(ctx, gw, nil, 4*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Lock(ctx, "home/h1", "gw-1", time.Minute); !errors.Is(err, registry.ErrLocked) {
		t.Fatalf("lock before the release: %v, want ErrLocked (the old lease lives on the new run's heartbeat)", err)
	}
	n, err := r.ReleaseLeasesOf(ctx, "gw-0")
	if err != nil || n != 2 {
		t.Fatalf("release: %d, %v; want the 2 leases of gw-0", n, err)
	}
	h1, err := r.Lock(ctx, "home/h1", "gw-1", time.Minute)
	if err != nil {
		t.Fatalf("lock after the release: %v", err)
	}
	if h1.Token <= old.Token {
		t.Fatalf("token after the release %d, not above %d", h1.Token, old.Token)
	}
	if _, err := r.Renew(ctx, old, time.Minute); !errors.Is(err, registry.ErrLeaseLost) {
		t.Fatalf("renew by the earlier run: %v, want ErrLeaseLost", err)
	}
	if _, err := r.Renew(ctx, other, time.Minute); err != nil {
		t.Fatalf("another holder's lease: %v", err)
	}
	if _, err := r.ReleaseLeasesOf(ctx, ""); err == nil {
		t.Fatal("release with no instance name: no error")
	}
}
