package wake_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// warmEngine returns an engine whose home h1 holds a fresh warm verdict: a
// static home at a real loopback listener, proven by a tcp probe.
func warmEngine(b *testing.B) *wake.Engine {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	store, err := bolt.Open(filepath.Join(b.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	static := &provider.Static{Endpoints: map[string]string{"h1": "http://" + ln.Addr().String()}}
	e := wake.New(wake.Options{
		Store: store, Providers: map[string]provider.Provider{"static": static},
		Sessions: sessions.New(), Instance: "bench",
		WarmTTL: time.Hour, ReadyTimeout: 5 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 1, FailureBackoff: time.Second,
		Probe:       probe.Spec{Kind: probe.TCP},
		RelayHeader: "X-Wakegate-Relay",
		Log:         slog.New(slog.DiscardHandler),
	})
	b.Cleanup(e.Close)
	ctx := context.Background()
	if err := e.Register(ctx, homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.EnsureAwake(ctx, "h1"); err != nil {
		b.Fatal(err)
	}
	if !e.Warm("h1") {
		b.Fatal("no warm verdict after the wake")
	}
	return e
}

// BenchmarkEnsureAwakeWarm measures a warm verdict hit, the path every
// request to an awake home takes. Target: under 100 ns and no allocation.
func BenchmarkEnsureAwakeWarm(b *testing.B) {
	e := warmEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, err := e.EnsureAwake(ctx, "h1")
		if err != nil || a.Endpoint == nil {
			b.Fatalf("warm hit: %+v %v", a, err)
		}
	}
}

// BenchmarkEnsureAwakeWarmParallel is the warm hit from every P at once.
func BenchmarkEnsureAwakeWarmParallel(b *testing.B) {
	e := warmEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := e.EnsureAwake(ctx, "h1")
			if err != nil || a.Endpoint == nil {
				b.Errorf("warm hit: %+v %v", a, err)
				return
			}
		}
	})
}

var clockSink int64

// BenchmarkTimeNow is the baseline of the warm hit: one reading of the
// clock, which the verdict's expiry check needs. On hosts without a fast
// vDSO clock it is most of BenchmarkEnsureAwakeWarm.
func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		clockSink += time.Now().UnixNano()
	}
}
