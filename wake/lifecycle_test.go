package wake_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// lcListener is a loopback listener that counts the connections it accepts
// (each tcp probe attempt is one) and closes them.
func lcListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String(), accepted
}

// lcEngine is an engine on store with one static home h1 at endpoint,
// proven by a tcp probe.
func lcEngine(t *testing.T, store registry.Store, instance, endpoint string, bus *events.Bus) *wake.Engine {
	t.Helper()
	o := lcOptions(t, store, sessions.New(), endpoint)
	o.Instance, o.Events = instance, bus
	e := wake.New(o)
	t.Cleanup(e.Close)
	if err := e.Register(context.Background(), homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// lcOptions are the options of lcEngine: one static home h1 at endpoint,
// proven by a tcp probe, with sessions.
func lcOptions(t *testing.T, store registry.Store, sessions *sessions.Table, endpoint string) wake.Options {
	t.Helper()
	return wake.Options{
		Store:     store,
		Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h1": endpoint}}},
		Sessions:  sessions, Instance: "gw-a",
		WarmTTL: time.Minute, ReadyTimeout: 20 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: time.Second,
		Probe:       probe.Spec{Kind: probe.TCP},
		RelayHeader: "X-Wakegate-Relay",
		Log:         slog.New(slog.DiscardHandler),
	}
}

func lcStore(t *testing.T) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A wake that waited for the lifecycle lock while another instance woke
// the home trusts that instance's fresh proof, read after the lock is
// taken: it returns the stored endpoint with no provider call and no probe.
func TestWakeAfterLockTrustsFreshProofByAnother(t *testing.T) {
	addr, accepted := lcListener(t)
	endpoint := "http://" + addr
	store := lcStore(t)
	eng := lcEngine(t, store, "b", endpoint, nil)
	ctx := context.Background()

	// Another instance holds the home's lifecycle lock: it is waking it.
	lease, err := store.Lock(ctx, "home/h1", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var got homes.Awake
	go func() {
		var err error
		got, err = eng.EnsureAwake(ctx, "h1")
		done <- err
	}()
	testbin.Eventually(t, "the wake to queue for the lock", func() bool {
		phase, _, ok := eng.Progress("h1")
		return ok && phase == "queued"
	})
	// The other instance proves the home ready, records it, and unlocks.
	if _, err := registry.UpdateHome(ctx, store, registry.Home{ID: "h1"}, "a", func(r *registry.Home) {
		r.Status, r.Verdict, r.Endpoint, r.WantRunning = registry.StatusRunning, registry.VerdictHealthy, endpoint, true
		r.LastReadyAt = time.Now()
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.Unlock(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("EnsureAwake: %v", err)
	}
	if got.Endpoint == nil || got.Endpoint.String() != endpoint {
		t.Fatalf("endpoint %v, want the proven %s", got.Endpoint, endpoint)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the home was probed %d times after another instance proved it", n)
	}
	if !eng.Warm("h1") {
		t.Fatal("no warm verdict from the trusted proof")
	}
}

// A proof older than the wake is not trusted: a wake after a dropped
// verdict (a failed forward) probes again.
func TestWakeAfterDropProbesAgain(t *testing.T) {
	addr, accepted := lcListener(t)
	eng := lcEngine(t, lcStore(t), "b", "http://"+addr, nil)
	ctx := context.Background()
	if _, err := eng.EnsureAwake(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	before := accepted.Load()
	if before == 0 {
		t.Fatal("the first wake did not probe")
	}
	eng.Drop("h1")
	if _, err := eng.EnsureAwake(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if accepted.Load() == before {
		t.Fatal("a wake after a dropped verdict trusted the stored proof instead of probing")
	}
}

// Wakes, a wake that gives up waiting for a lock held elsewhere, a suspend
// and a removal leave no goroutine or timer behind once the engine closes.
func TestLifecycleLeavesNoGoroutines(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	addr, _ := lcListener(t)
	store := lcStore(t)
	eng := lcEngine(t, store, "b", "http://"+addr, nil)
	ctx := context.Background()
	if _, err := eng.EnsureAwake(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if err := eng.Suspend(ctx, "h1"); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	// Another instance holds the lock: the wake waits, and its caller's
	// time runs out first.
	lease, err := store.Lock(ctx, "home/h1", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = eng.EnsureAwake(short, "h1")
	cancel()
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.NotReady {
		t.Fatalf("wake behind a lock held elsewhere: %v, want not ready", err)
	}
	if err := eng.Remove(ctx, "h1", 0); !fault.Is(err, fault.Busy) {
		t.Fatalf("remove while the lock is held: %v, want busy", err)
	}
	if err := store.Unlock(ctx, lease); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the queued wake to finish", func() bool {
		_, _, waking := eng.Progress("h1")
		return !waking
	})
	if err := eng.Remove(ctx, "h1", 0); err != nil {
		t.Fatalf("remove: %v", err)
	}
	eng.Close()
}

// A wake cut short because the engine closes (the gateway shuts down)
// answers its callers with shutting down, not with a failed wake.
func TestWakeCutByCloseIsShuttingDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // the home never listens
	e := wake.New(wake.Options{
		Store:     lcStore(t),
		Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h1": "http://" + closed}}},
		Sessions:  sessions.New(), Instance: "test",
		WarmTTL: time.Minute, ReadyTimeout: time.Hour, RetryAfter: time.Second,
		MaxConcurrent: 1, FailureBackoff: time.Second,
		Probe: probe.Spec{Kind: probe.TCP}, RelayHeader: "X-Wakegate-Relay",
		Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(e.Close)
	ctx := context.Background()
	if err := e.Register(ctx, homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.EnsureAwake(ctx, "h1")
		done <- err
	}()
	testbin.Eventually(t, "the wake to probe", func() bool {
		phase, _, ok := e.Progress("h1")
		return ok && phase == "probing"
	})
	e.Close()
	if err := <-done; !fault.Is(err, fault.ShuttingDown) {
		t.Fatalf("wake cut by Close: %v, want shutting down", err)
	}
	if _, err := e.EnsureAwake(ctx, "h1"); !fault.Is(err, fault.ShuttingDown) {
		t.Fatalf("wake after Close: %v, want shutting down", err)
	}
}
