package wake_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// TestQueuedWakeGetsItsWholeReadyTimeout: with one wake slot, a wake
// queued behind another that takes its whole ready timeout still gets a
// ready timeout of its own once it has the slot; it does not fail for
// the time it spent in the queue.
func TestQueuedWakeGetsItsWholeReadyTimeout(t *testing.T) {
	// h1's endpoint takes no connection: its wake runs until its ready
	// timeout and holds the only slot all that time. h2's starts to listen
	// half a second after that, so h2's wake needs time of its own after
	// the slot.
	dead, ready := freeAddr(t), freeAddr(t)

	o := lcOptions(t, lcStore(t), sessions.New(), "")
	o.Providers = map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{
		"h1": "http://" + dead, "h2": "http://" + ready}}}
	o.MaxConcurrent = 1
	o.ReadyTimeout = 2 * time.Second
	o.QueueTimeout = 30 * time.Second
	e := wake.New(o)
	t.Cleanup(e.Close)
	ctx := context.Background()
	for _, id := range []string{"h1", "h2"} {
		if err := e.Register(ctx, homes.Spec{ID: id, Target: id, Provider: "static"}); err != nil {
			t.Fatal(err)
		}
	}

	type end struct {
		err error
		at  time.Time
	}
	first := make(chan end, 1)
	go func() {
		_, err := e.EnsureAwake(ctx, "h1")
		first <- end{err, time.Now()}
	}()
	// h1's wake takes the slot before h2 asks.
	deadline := time.Now().Add(10 * time.Second)
	for e.Sleeping("h1") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	second := make(chan end, 1)
	go func() {
		_, err := e.EnsureAwake(ctx, "h2")
		second <- end{err, time.Now()}
	}()
	f := <-first
	go func() {
		time.Sleep(500 * time.Millisecond)
		ln, err := net.Listen("tcp", ready)
		if err != nil {
			t.Errorf("listen on h2's endpoint: %v", err)
			return
		}
		t.Cleanup(func() { _ = ln.Close() })
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	if f.err == nil {
		t.Fatal("h1 woke, but its endpoint takes no connection")
	}
	s := <-second
	if s.err != nil {
		t.Fatalf("h2, queued behind h1 for about its ready timeout: %v; want awake", s.err)
	}
	if s.at.Before(f.at) {
		t.Fatal("h2 woke before h1's wake ended: it did not wait in the queue, so the test proves nothing")
	}
}

// freeAddr is a loopback address nothing listens on (a port the kernel
// gave and took back).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
