package h1serve

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/ctxhook"
)

// startHooked serves h on the loop alone, under base as the server's base
// context.
func startHooked(t *testing.T, base context.Context, h http.Handler) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, BaseContext: base, ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return s, ln.Addr().String()
}

// armedSlots counts the connections of s whose slot holds a watch.
func armedSlots(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.hook.mu.Lock()
		if c.hook.f != nil {
			n++
		}
		c.hook.mu.Unlock()
	}
	return n
}

// TestHookRunsWhenTheRequestEnds: a watch taken through ctxhook runs in
// every way the request's context can end, whether the loop's slot took
// it or context.AfterFunc did (a context the loop did not make, a second
// watch, a context already done), as context.AfterFunc's would.
func TestHookRunsWhenTheRequestEnds(t *testing.T) {
	cases := []struct {
		name string
		// arm takes the watch (or watches) on the request's context.
		arm func(r *http.Request, f func())
		// slot is how many slots hold a watch once arm returns.
		slot int
		// end makes the request's context end: the client leaves, the
		// handler returns, the server's base context is cancelled.
		end string
	}{
		{"client leaves", armRequest, 1, "client"},
		{"handler returns with the watch armed", armRequest, 1, "return"},
		{"base context cancelled", armRequest, 1, "base"},
		{"a context the loop did not make", func(r *http.Request, f func()) {
			ctx, cancel := context.WithCancel(r.Context())
			ctxhook.AfterFunc(ctx, f)
			cancel()
		}, 0, "return"},
		{"a second watch", func(r *http.Request, f func()) {
			ctxhook.AfterFunc(r.Context(), func() {})
			ctxhook.AfterFunc(r.Context(), f)
		}, 1, "client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, cancelBase := context.WithCancel(context.Background())
			defer cancelBase()
			ran := make(chan struct{})
			armed := make(chan int, 1)
			var srv atomic.Pointer[Server]
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.arm(r, func() { close(ran) })
				armed <- armedSlots(srv.Load())
				if tc.end != "return" {
					// As the forwarder does: blocked until the watch
					// interrupts it, not until the context ends.
					select {
					case <-ran:
					case <-time.After(10 * time.Second):
					}
				}
			})
			s, addr := startHooked(t, base, h)
			srv.Store(s)
			c := dialRaw(t, addr)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if n := <-armed; n != tc.slot {
				t.Fatalf("%d slots armed, want %d", n, tc.slot)
			}
			switch tc.end {
			case "client":
				_ = c.Close()
			case "base":
				cancelBase()
			}
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not run after the request's context ended")
			}
		})
	}
}

func armRequest(r *http.Request, f func()) { ctxhook.AfterFunc(r.Context(), f) }

// TestHookStop: a stopped watch never runs, and a stop of an earlier
// watch leaves a later one armed; a context already done is refused.
func TestHookStop(t *testing.T) {
	c := &conn{ctx: context.Background()}
	ctx, cancel := context.WithCancelCause(context.Background())
	c.hook.begin(ctx)
	first, ok := c.AfterFunc(ctx, func() { t.Error("a stopped watch ran") })
	if !ok {
		t.Fatal("the slot refused the request's own context")
	}
	if !first() {
		t.Fatal("stop of an armed watch reported false")
	}
	if c.hook.fire() {
		t.Fatal("fire found a watch after stop")
	}
	ran := make(chan struct{})
	second, ok := c.AfterFunc(ctx, func() { close(ran) })
	if !ok {
		t.Fatal("the slot refused a watch after the first stopped")
	}
	if first() {
		t.Fatal("the first watch's stop, called again, reported true")
	}
	if _, ok := c.AfterFunc(ctx, func() {}); ok {
		t.Fatal("the slot took a second watch while one is armed")
	}
	if _, ok := c.AfterFunc(context.Background(), func() {}); ok {
		t.Fatal("the slot took a context that is not the request's")
	}
	c.hook.end(cancel)
	<-ran
	if second() {
		t.Fatal("stop after the watch ran reported true")
	}
	if _, ok := c.AfterFunc(ctx, func() {}); ok {
		t.Fatal("the slot took a context after its request ended")
	}
	c.endHook()
}
