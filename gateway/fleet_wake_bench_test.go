package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// BenchmarkFleetWakeOverhead measures, in one run on one Redis, a cold
// wake through a single gateway (A alone) against a cold wake through
// gateway B while A holds the fleet's lease: B's request is sent once A's
// wake has recorded the home waking, waits on the lock, and is answered
// from A's proof. Each iteration measures both. Reported: the medians of
// A alone and of B (from the moment A's request was sent, as a client of
// B that came with A's would see it), their ratio, and the median time B
// answered after A did (the fleet's own cost: the release's announcement,
// B's lock and record read).
func BenchmarkFleetWakeOverhead(b *testing.B) {
	srv := registrytest.StartRedis(b)
	conf := func(instance string) string {
		return fmt.Sprintf("instance: %s\nwake:\n  idle_timeout: 0s\nhomes:\n  - id: demo\nredis:\n  url: %q\n", instance, srv.URL())
	}
	gwA, gwB := e2eStartInProcess(b, conf("gw-a")), e2eStartInProcess(b, conf("gw-b"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := redis.Open(ctx, redis.Options{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(gw *e2eGateway) (time.Time, error) {
		res, err := client.Get("http://" + gw.addr + "/node/demo/whoami")
		if err != nil {
			return time.Time{}, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return time.Time{}, fmt.Errorf("status %d", res.StatusCode)
		}
		return time.Now(), nil
	}
	var single, viaB, behind []time.Duration
	for b.Loop() {
		suspend(b, gwA)
		gwB.g.Engine().Drop("demo")
		t0 := time.Now()
		end, err := get(gwA)
		if err != nil {
			b.Fatalf("cold wake through A alone: %v", err)
		}
		single = append(single, end.Sub(t0))

		suspend(b, gwA)
		gwB.g.Engine().Drop("demo")
		aDone := make(chan time.Time, 1)
		t0 = time.Now()
		go func() {
			end, err := get(gwA)
			if err != nil {
				b.Errorf("cold wake through A: %v", err)
			}
			aDone <- end
		}()
		waitWaking(b, store)
		endB, err := get(gwB)
		if err != nil {
			b.Fatalf("cold wake through B: %v", err)
		}
		endA := <-aDone
		viaB = append(viaB, endB.Sub(t0))
		behind = append(behind, endB.Sub(endA))
	}
	mS, mB, mBehind := medianDuration(single), medianDuration(viaB), medianDuration(behind)
	b.ReportMetric(float64(mS.Microseconds())/1000, "single-ms")
	b.ReportMetric(float64(mB.Microseconds())/1000, "fleetB-ms")
	b.ReportMetric(float64(mBehind.Microseconds())/1000, "B-after-A-ms")
	b.ReportMetric(float64(mB)/float64(mS), "fleetB/single")
}

// waitWaking waits until the stored demo home says a wake holds its lease.
func waitWaking(b *testing.B, store *redis.Store) {
	b.Helper()
	if !testbin.Poll(30*time.Second, 100*time.Microsecond, func() bool {
		rec, err := store.GetHome(context.Background(), "demo")
		return err == nil && rec.Status == registry.StatusWaking
	}) {
		b.Fatal("A's wake never recorded the home waking")
	}
}

// medianDuration returns the middle of ds (sorted in place).
func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
