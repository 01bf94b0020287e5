package h1serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	c := &conn{ctx: context.Background(), reqBase: context.Background()}
	ctx, cancel := context.WithCancelCause(context.Background())
	c.begin(ctx, cancel)
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

// TestRequestContextFollowsBase: a request's context ends when the
// server's base context does, with its cause, whether the base ends
// while the request runs or before it starts, and carries the base's
// deadline, on the loop as on net/http (a request's context is not the
// connection context's child on the loop: conn.reqBase).
func TestRequestContextFollowsBase(t *testing.T) {
	errBase := errors.New("base ended")
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	cases := []struct {
		name string
		// when is when the base ends: "running" (while the second
		// request waits), "before" (between the two requests), "never".
		when     string
		deadline bool
		want     string // the second request's account
	}{
		{"base ends while the request runs", "running", false, "entry=<nil> end=context canceled cause=base ended deadline=false"},
		{"base ended before the request", "before", false, "entry=context canceled end=- cause=base ended deadline=false"},
		{"base with a deadline", "never", true, "entry=<nil> end=- cause=<nil> deadline=true"},
		{"base with a deadline ends while the request runs", "running", true, "entry=<nil> end=context canceled cause=base ended deadline=true"},
	}
	for _, tc := range cases {
		for _, loop := range []bool{true, false} {
			name := tc.name + "/net-http"
			if loop {
				name = tc.name + "/loop"
			}
			t.Run(name, func(t *testing.T) {
				base, cancelBase := context.WithCancelCause(context.Background())
				defer cancelBase(nil)
				if tc.deadline {
					var cancel context.CancelFunc
					base, cancel = context.WithDeadline(base, deadline)
					defer cancel()
				}
				started := make(chan struct{}, 1)
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					ctx := r.Context()
					entry := ctx.Err()
					end := "-"
					if r.URL.Path == "/wait" {
						started <- struct{}{}
						select {
						case <-ctx.Done():
							end = ctx.Err().Error()
						case <-time.After(10 * time.Second):
							end = "never"
						}
					}
					d, ok := ctx.Deadline()
					_, _ = fmt.Fprintf(w, "entry=%v end=%s cause=%v deadline=%v", entry, end,
						context.Cause(ctx), ok && d.Equal(deadline))
				})
				addr := startBased(t, loop, base, h)
				c := dialRaw(t, addr)
				br := bufio.NewReader(c)
				ask := func(path string) string {
					t.Helper()
					if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
						t.Fatal(err)
					}
					if path == "/wait" && tc.when == "running" {
						<-started
						cancelBase(errBase)
					}
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(res.Body)
					_ = res.Body.Close()
					return string(b)
				}
				first := ask("/")
				if want := "entry=<nil> end=- cause=<nil> deadline=" + fmt.Sprint(tc.deadline); first != want {
					t.Fatalf("first request: %q, want %q", first, want)
				}
				second := "/"
				switch tc.when {
				case "before":
					cancelBase(errBase)
				case "running":
					second = "/wait"
				}
				if got := ask(second); got != tc.want {
					t.Fatalf("second request: %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// startBased serves h under base as the server's base context, on the
// loop alone or on net/http alone.
func startBased(t *testing.T, loop bool, base context.Context, h http.Handler) string {
	t.Helper()
	if loop {
		_, addr := startHooked(t, base, h)
		return addr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, BaseContext: func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return ln.Addr().String()
}
