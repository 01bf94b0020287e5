package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestClaimNameIsOneRunsAtATime: a live claim on an instance name keeps
// every other run out, the run that holds it may claim it again, a run
// that names the holder as ended replaces it, and a lapsed claim is free.
func TestClaimNameIsOneRunsAtATime(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clock := registrytest.NewClock()
	a := openTestRedis(t, srv, "names", clock.Now)
	b := openTestRedis(t, srv, "names", clock.Now)
	ctx := context.Background()

	if err := a.ClaimName(ctx, "gw", "run-a", `{"host":"vm-a"}`, "", 4*time.Second); err != nil {
		t.Fatal(err)
	}
	err := b.ClaimName(ctx, "gw", "run-b", `{"host":"vm-b"}`, "", 4*time.Second)
	var taken *redis.NameTakenError
	if !errors.As(err, &taken) || taken.Holder != `{"host":"vm-a"}` || !errors.Is(err, registry.ErrNameTaken) {
		t.Fatalf("a second run's claim on a live one: %v; want a NameTakenError naming the holder", err)
	}
	if err := b.ClaimName(ctx, "gw", "run-b", "", "run-c", 4*time.Second); !errors.As(err, &taken) {
		t.Fatalf("a claim that names another run as ended: %v; want it refused", err)
	}
	if err := a.ClaimName(ctx, "gw", "run-a", `{"host":"vm-a"}`, "", 4*time.Second); err != nil {
		t.Fatalf("the holder's own claim again: %v", err)
	}
	h, live, err := b.NameHolder(ctx, "gw")
	if err != nil || !live || h.Nonce != "run-a" || !h.Expires.Equal(clock.Now().Add(4*time.Second)) {
		t.Fatalf("NameHolder = %+v, %v, %v; want run-a's claim, 4s from now", h, live, err)
	}
	if err := b.ClaimName(ctx, "gw", "run-b", `{"host":"vm-b"}`, "run-a", 4*time.Second); err != nil {
		t.Fatalf("a claim that replaces an ended run's: %v", err)
	}
	clock.Advance(5 * time.Second)
	if _, live, _ := a.NameHolder(ctx, "gw"); live {
		t.Fatal("a lapsed claim is still live")
	}
	if err := a.ClaimName(ctx, "gw", "run-a", "", "", 4*time.Second); err != nil {
		t.Fatalf("a claim on a lapsed one: %v", err)
	}
	if err := a.ClaimName(ctx, "gw", "bad|nonce", "", "", time.Second); err == nil {
		t.Fatal("a nonce with '|' was taken")
	}
}

// TestStaleRunLosesItsName: a run whose claim lapsed (paused past its
// heartbeat's TTL) while another run took the name over has its next
// heartbeat refused, and leaves the new run's report alone: it cannot
// overwrite its sessions, withdraw its heartbeat or take locks, its store
// says why it is out, and it stays out once the name is free again.
func TestStaleRunLosesItsName(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clock := registrytest.NewClock()
	stale := openTestRedis(t, srv, "stale", clock.Now)
	fresh := openTestRedis(t, srv, "stale", clock.Now)
	ctx := context.Background()
	const ttl = 4 * time.Second

	if err := stale.ClaimName(ctx, "gw", "run-old", `{"host":"vm-a","pid":10}`, "", ttl); err != nil {
		t.Fatal(err)
	}
	if err := stale.ReportSessions(ctx, "gw", map[string]int{"h1": 0}, ttl); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl + time.Second) // the old run is paused past its TTL
	if err := fresh.ClaimName(ctx, "gw", "run-new", `{"host":"vm-b","pid":20}`, "", ttl); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ReportSessions(ctx, "gw", map[string]int{"h1": 2}, ttl); err != nil {
		t.Fatal(err)
	}

	err := stale.ReportSessions(ctx, "gw", map[string]int{}, ttl)
	if !errors.Is(err, registry.ErrNameTaken) {
		t.Fatalf("the stale run's heartbeat: %v; want it refused with ErrNameTaken", err)
	}
	if n, err := fresh.FleetSessions(ctx, "h1"); err != nil || n != 2 {
		t.Fatalf("h1's sessions after the stale heartbeat: %d, %v; want the new run's 2", n, err)
	}
	if err := stale.Unavailable(); !errors.Is(err, registry.ErrNameTaken) || !strings.Contains(err.Error(), "pid 20 on vm-b") {
		t.Errorf("the stale store's Unavailable: %v; want ErrNameTaken naming the new run", err)
	}
	if err := fresh.Unavailable(); err != nil {
		t.Errorf("the new run's store: %v", err)
	}
	if _, err := stale.Lock(ctx, "home/h1", "gw", time.Minute); !errors.Is(err, registry.ErrNameTaken) || !errors.Is(err, registry.ErrUnavailable) {
		t.Errorf("a lock of the stale run: %v; want it refused as unavailable", err)
	}
	if err := stale.WithdrawReport(ctx, "gw"); !errors.Is(err, registry.ErrNameTaken) {
		t.Errorf("the stale run's withdrawal: %v; want it refused", err)
	}
	if n, _ := fresh.FleetSessions(ctx, "h1"); n != 2 {
		t.Fatalf("h1's sessions after the stale withdrawal: %d; want 2", n)
	}
	if err := fresh.WithdrawReport(ctx, "gw"); err != nil {
		t.Fatal(err)
	}
	if _, live, _ := fresh.NameHolder(ctx, "gw"); live {
		t.Error("the claim outlived its run's withdrawal")
	}
	if n, _ := fresh.FleetSessions(ctx, "h1"); n != 0 {
		t.Errorf("h1's sessions after the withdrawal: %d; want 0", n)
	}
	// The name is free again, but the run that lost it stays out.
	if err := stale.ReportSessions(ctx, "gw", map[string]int{"h1": 1}, ttl); !errors.Is(err, registry.ErrNameTaken) {
		t.Errorf("the stale run's heartbeat once the name is free: %v; want it still refused", err)
	}
	if _, live, _ := fresh.NameHolder(ctx, "gw"); live {
		t.Error("the stale run took the name back")
	}
}

// TestReportsNameTheRunOfEachInstance: the fleet's reports say which
// process runs each instance, from the live claim on its name: "pid N on
// HOST" for a run that claimed it, nothing for an instance that made no
// claim (a version that claims none).
func TestReportsNameTheRunOfEachInstance(t *testing.T) {
	srv := registrytest.StartRedis(t)
	clock := registrytest.NewClock()
	a := openTestRedis(t, srv, "runs", clock.Now)
	b := openTestRedis(t, srv, "runs", clock.Now)
	ctx := context.Background()

	if err := a.ClaimName(ctx, "gw-a", "run-a", `{"host":"vm-a","pid":4242}`, "", 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.ReportSessions(ctx, "gw-b", map[string]int{"h1": 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	runs := func() map[string]string {
		t.Helper()
		reps, err := b.Reports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range reps {
			out[r.Instance] = r.Run
		}
		return out
	}
	if got := runs(); got["gw-a"] != "pid 4242 on vm-a" || got["gw-b"] != "" || len(got) != 2 {
		t.Fatalf("runs of the reports: %q; want gw-a's as pid 4242 on vm-a, gw-b's empty", got)
	}
	clock.Advance(5 * time.Second) // gw-a's report and claim lapse; gw-b's report lives
	if got := runs(); len(got) != 1 || got["gw-b"] != "" {
		t.Fatalf("runs once gw-a lapsed: %q; want gw-b alone, with no run", got)
	}
}
