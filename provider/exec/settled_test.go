package execprov

import (
	"context"
	"errors"
	"testing"
)

// Every way out of the wait for a supervisor restart leaves the provider's
// mutex free: a restart that ends, a caller that goes away, a provider that
// closes. A path that returned with e.mu held would deadlock the next call
// (and fail TryLock here).
func TestSettledNeverReturnsHoldingTheMutex(t *testing.T) {
	cases := []struct {
		name string
		end  func(e *Provider, restart chan struct{}, cancel context.CancelFunc)
		want error
	}{
		{"restart ends", func(e *Provider, restart chan struct{}, _ context.CancelFunc) {
			e.mu.Lock()
			e.homes["h1"].restarting = nil
			e.mu.Unlock()
			close(restart)
		}, nil},
		{"caller goes away", func(_ *Provider, _ chan struct{}, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"provider closes", func(e *Provider, _ chan struct{}, _ context.CancelFunc) { _ = e.Close() }, errClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newExec(t, testConfig(testDataDir(t)))
			h, err := e.homeFor("h1")
			if err != nil {
				t.Fatal(err)
			}
			restart := make(chan struct{})
			e.mu.Lock()
			h.restarting = restart // a supervisor restart in flight
			e.mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			ran := false
			go func() { done <- e.settled(ctx, h, func() { ran = true }) }()
			c.end(e, restart, cancel)
			err = <-done
			if !errors.Is(err, c.want) {
				t.Fatalf("settled: %v, want %v", err, c.want)
			}
			if ran != (c.want == nil) {
				t.Fatalf("fn ran: %v, want %v", ran, c.want == nil)
			}
			if !e.mu.TryLock() {
				t.Fatal("settled returned with the provider's mutex held")
			}
			e.mu.Unlock()
		})
	}
}
