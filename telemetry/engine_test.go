package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// A storm of 1000 wakes, with an event subscriber that never reads (the
// bus drops every event for it): the wake counters equal the wakes,
// because the engine counts at the source, not from the bus.
func TestMetricsCountEveryWakeOfAStorm(t *testing.T) {
	const storm = 1000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepted
	})
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	static := &provider.Static{Endpoints: map[string]string{}}
	for i := range storm {
		static.Endpoints[fmt.Sprintf("h%d", i)] = "http://" + ln.Addr().String()
	}
	bus := events.NewBus(16)
	stuck := bus.Subscribe(1) // a subscriber that never reads
	t.Cleanup(stuck.Close)
	em := NewEngine()
	reg := prometheus.NewRegistry()
	reg.MustRegister(em.collectors()...)
	eng := wake.New(wake.Options{
		Store: store, Providers: map[string]provider.Provider{"static": static},
		Sessions: sessions.New(), Instance: "storm",
		WarmTTL: time.Hour, ReadyTimeout: time.Minute, RetryAfter: time.Second,
		MaxConcurrent: 64, FailureBackoff: time.Second,
		Probe: probe.Spec{Kind: probe.TCP}, RelayHeader: "X-Wakegate-Relay",
		Log: slog.New(slog.DiscardHandler), Events: bus, Metrics: em,
	})
	t.Cleanup(eng.Close)
	ctx := context.Background()
	for i := range storm {
		if err := eng.Register(ctx, homes.Spec{ID: fmt.Sprintf("h%d", i), Target: fmt.Sprintf("t%d", i), Provider: "static"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, storm)
	for i := range storm {
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if _, err := eng.EnsureAwake(wctx, fmt.Sprintf("h%d", i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("wake: %v", err)
	}
	// A wake is counted before its callers are released.
	if got := emCounter(t, em.wakes.WithLabelValues("ready", "cold")); got != storm {
		t.Fatalf("wakegate_wakes_total{outcome=ready,cause=cold} = %v, want %d", got, storm)
	}
	if got := emCounter(t, em.wakes.WithLabelValues("failed", "cold")); got != 0 {
		t.Fatalf("failed wakes counted: %v", got)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		if f.GetName() != "wakegate_wake_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			series++
			if n := m.GetHistogram().GetSampleCount(); n != storm {
				t.Fatalf("wakegate_wake_seconds %v: %d samples, want %d", m.GetLabel(), n, storm)
			}
		}
	}
	if series != 3 {
		t.Fatalf("wakegate_wake_seconds has %d series, want 3 (provider, probe, total)", series)
	}
	if bus.Dropped() == 0 {
		t.Fatal("the stuck subscriber dropped no event: the storm did not test a lossy bus")
	}
}

// emCounter reads a counter's value.
func emCounter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The stop of a half-woken home after a failed wake is counted with
// whether it was proven: a static home cannot be proven down.
func TestMetricsCountUnprovenStopOfFailedWake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // every probe attempt is refused
	store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	em := NewEngine()
	eng := wake.New(wake.Options{
		Store: store, Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h1": "http://" + closed}}},
		Sessions: sessions.New(), Instance: "stop",
		WarmTTL: time.Hour, ReadyTimeout: 200 * time.Millisecond, RetryAfter: time.Second,
		MaxConcurrent: 1, FailureBackoff: time.Second,
		Probe: probe.Spec{Kind: probe.TCP}, RelayHeader: "X-Wakegate-Relay",
		Log: slog.New(slog.DiscardHandler), Metrics: em,
	})
	t.Cleanup(eng.Close)
	ctx := context.Background()
	if err := eng.Register(ctx, homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.EnsureAwake(ctx, "h1"); err == nil {
		t.Fatal("a home that never listens woke")
	}
	// The caller goes at the ready timeout; the stop is counted once it
	// has ended.
	testbin.Eventually(t, "the stop counted", func() bool {
		return emCounter(t, em.stops.WithLabelValues("false")) == 1
	})
	if got := emCounter(t, em.stops.WithLabelValues("false")); got != 1 {
		t.Fatalf(`wakegate_wake_stop_total{proven="false"} = %v, want 1`, got)
	}
	if got := emCounter(t, em.stops.WithLabelValues("true")); got != 0 {
		t.Fatalf(`wakegate_wake_stop_total{proven="true"} = %v, want 0`, got)
	}
	if got := emCounter(t, em.wakes.WithLabelValues("failed", "cold")); got != 1 {
		t.Fatalf(`wakegate_wakes_total{outcome="failed",cause="cold"} = %v, want 1`, got)
	}
}

// A wake that started nothing (a re-verification, or a wait for another
// operation's wake) is counted under its own cause, never as cold, and
// adds nothing to the wake timings.
func TestStartlessWakesKeepOutOfTimings(t *testing.T) {
	em := NewEngine()
	em.WakeDone("ready", "cold", 10*time.Millisecond, 200*time.Millisecond, 215*time.Millisecond)
	em.WakeDone("ready", wake.CauseWaited, 0, 0, 300*time.Millisecond)
	em.WakeDone("ready", wake.CauseVerify, 0, time.Millisecond, time.Millisecond)
	for cause, want := range map[string]float64{"cold": 1, wake.CauseWaited: 1, wake.CauseVerify: 1, "other": 0} {
		if got := emCounter(t, em.wakes.WithLabelValues("ready", cause)); got != want {
			t.Errorf("wakegate_wakes_total{outcome=ready,cause=%s} = %v, want %v", cause, got, want)
		}
	}
	for _, phase := range []string{"provider", "probe", "total"} {
		var m dto.Metric
		if err := em.wakeSeconds.WithLabelValues(phase).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("wakegate_wake_seconds{phase=%s} holds %d wakes, want only the cold one", phase, n)
		}
	}
}
