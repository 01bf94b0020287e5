package redis_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// openTestRedis opens a Redis store on srv under a prefix of its own (an
// empty store), closed when t ends.
func openTestRedis(t *testing.T, srv *registrytest.RedisServer, prefix string, now func() time.Time) *redis.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: prefix, Now: now})
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

func TestRedisConformance(t *testing.T) {
	srv := registrytest.StartRedis(t)
	var n atomic.Int64
	registrytest.Run(t, func(t *testing.T) (registry.Store, func(time.Duration)) {
		clk := registrytest.NewClock()
		return openTestRedis(t, srv, fmt.Sprintf("conf-%d", n.Add(1)), clk.Now), clk.Advance
	})
}

func TestRedisUnavailable(t *testing.T) {
	registrytest.RunUnavailable(t, func(t *testing.T) (registry.Store, func(), func()) {
		srv := registrytest.StartRedis(t)
		r := openTestRedis(t, srv, "wakegate", nil)
		return r, srv.Kill, srv.Restart
	})
}

func TestRedisReportsListInstances(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clk := registrytest.NewClock()
	r := openTestRedis(t, srv, "reports", clk.Now)
	ctx := context.Background()
	if err := r.ReportSessions(ctx, "gw-b", map[string]int{"h1": 2}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := r.ReportSessions(ctx, "gw-a", nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	reps, err := r.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].Instance != "gw-a" || len(reps[0].Sessions) != 0 ||
		reps[1].Instance != "gw-b" || reps[1].Sessions["h1"] != 2 {
		t.Fatalf("reports %+v, want gw-a with no session (its heartbeat) and gw-b with 2 on h1", reps)
	}
	if age := reps[0].ReportedAt.Sub(reps[1].ReportedAt); age != time.Second {
		t.Fatalf("gw-a reported %s after gw-b, want 1s", age)
	}
	clk.Advance(9500 * time.Millisecond) // gw-b's report lapsed, gw-a's not yet
	if reps, err = r.Reports(ctx); err != nil || len(reps) != 1 || reps[0].Instance != "gw-a" {
		t.Fatalf("reports after gw-b's expiry: %+v %v, want gw-a alone", reps, err)
	}
}

func TestRedisReportsCarryVersions(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clk := registrytest.NewClock()
	r := openTestRedis(t, srv, "versions", clk.Now)
	ctx := context.Background()
	for _, v := range []struct{ instance, version string }{{"gw-a", "1.4.0"}, {"gw-b", "1.5.0"}} {
		if err := r.SetVersion(ctx, v.instance, v.version); err != nil {
			t.Fatal(err)
		}
		if err := r.ReportSessions(ctx, v.instance, nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.ReportSessions(ctx, "gw-c", nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	reps, err := r.Reports(ctx)
	if err != nil || len(reps) != 3 || reps[0].Version != "1.4.0" || reps[1].Version != "1.5.0" || reps[2].Version != "" {
		t.Fatalf("reports %+v %v, want gw-a on 1.4.0, gw-b on 1.5.0, gw-c with no version", reps, err)
	}
	// gw-a and gw-b lapse; gw-c's next report prunes them with their
	// versions, so a later instance of the same name starts with none.
	clk.Advance(15 * time.Second)
	if err := r.ReportSessions(ctx, "gw-c", nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.ReportSessions(ctx, "gw-a", nil, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if reps, err = r.Reports(ctx); err != nil || len(reps) != 2 || reps[0].Instance != "gw-a" || reps[0].Version != "" {
		t.Fatalf("reports after the lapse %+v %v, want gw-a again with no version, and gw-c", reps, err)
	}
}

func TestRedisAdminLeases(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clk := registrytest.NewClock()
	a, b := openTestRedis(t, srv, "leases", clk.Now), openTestRedis(t, srv, "leases", clk.Now)
	ctx := context.Background()
	if err := a.ReportSessions(ctx, "gw-a", map[string]int{"h1": 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	l1, exp, err := a.AddAdminLease(ctx, "h1", 10*time.Second)
	if err != nil || !exp.Equal(clk.Now().Add(10*time.Second)) {
		t.Fatalf("add lease: %d %s %v, want expiry in 10s", l1, exp, err)
	}
	l2, _, err := b.AddAdminLease(ctx, "h1", time.Hour)
	if err != nil || l2 == l1 {
		t.Fatalf("second lease: %d %v, want an id other than %d", l2, err, l1)
	}
	if _, _, err := b.AddAdminLease(ctx, "h10", time.Hour); err != nil { // a home whose id starts alike
		t.Fatal(err)
	}
	fleet := func(want int, when string) {
		t.Helper()
		if n, err := b.FleetSessions(ctx, "h1"); err != nil || n != want {
			t.Fatalf("fleet sessions of h1 %s: %d %v, want %d", when, n, err, want)
		}
	}
	fleet(4, "with two reported sessions and two leases")
	clk.Advance(11 * time.Second)
	fleet(3, "once the first lease expired")
	if live, err := b.EndAdminLease(ctx, "h1", l1); err != nil || live {
		t.Fatalf("end an expired lease: %v %v, want false", live, err)
	}
	if live, err := b.EndAdminLease(ctx, "h1", l2); err != nil || !live {
		t.Fatalf("end, through another client, a live lease: %v %v, want true", live, err)
	}
	fleet(2, "once the leases ended")
	if live, err := a.EndAdminLease(ctx, "h1", l2); err != nil || live {
		t.Fatalf("end a lease again: %v %v, want false", live, err)
	}
}
