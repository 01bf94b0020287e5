package wake

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
)

// refusedLocks is the bolt store, telling when a lock was refused.
type refusedLocks struct {
	registry.Store
	refused chan struct{}
}

func (s refusedLocks) Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error) {
	l, err := s.Store.Lock(ctx, name, holder, ttl)
	if errors.Is(err, registry.ErrLocked) {
		select {
		case s.refused <- struct{}{}:
		default:
		}
	}
	return l, err
}

// A wake queued behind a lifecycle operation of this instance waits for
// the holder's broadcast, with no timer of its own: it goes on the moment
// the holder releases the lock. (Without the broadcast it would wait until
// its caller's deadline, which is far beyond the test's guard.)
func TestWakeWaitsOnTheHoldersBroadcast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	bolt, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	store := refusedLocks{Store: bolt, refused: make(chan struct{}, 1)}
	e := New(Options{
		Store:     store,
		Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h1": "http://" + ln.Addr().String()}}},
		Sessions:  sessions.New(), Instance: "me",
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
	h := e.home("h1")

	// An operation of this instance holds the lock until release closes.
	holding, release := make(chan struct{}), make(chan struct{})
	heldErr := make(chan error, 1)
	go func() {
		heldErr <- e.runLocked(ctx, h, lifecycleOp{name: "hold", lease: time.Hour,
			run: func(context.Context, *held) error {
				close(holding)
				<-release
				return nil
			}})
	}()
	<-holding
	woke := make(chan error, 1)
	go func() {
		_, err := e.EnsureAwake(ctx, "h1")
		woke <- err
	}()
	// The wake has found the lock held and waits.
	select {
	case <-store.refused:
	case err := <-woke:
		t.Fatalf("the wake ended while the lock was held: %v", err)
	}
	close(release)
	if err := <-heldErr; err != nil {
		t.Fatal(err)
	}
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("wake after the release: %v", err)
		}
	case <-guard.C:
		t.Fatal("the wake did not go on when the holder released the lock")
	}
}
