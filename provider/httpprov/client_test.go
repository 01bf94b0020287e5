package httpprov

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// TestMain removes the binary the end-to-end test built and checks that no
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	code := testbin.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// newClient returns a provider for cp's contract with fast polling.
func newClient(t *testing.T, base string, mod func(*Config)) *Provider {
	t.Helper()
	c := Config{BaseURL: base, Secret: testSecret, PollInterval: 20 * time.Millisecond, LongPoll: 5 * time.Second}
	if mod != nil {
		mod(&c)
	}
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var alice = provider.Spec{ID: "alice", Target: "alice", Version: "1", Image: "registry.example/app:1",
	Options: json.RawMessage(`{"size":"small"}`)}

// asError returns err's *provider.Error, failing the test without one.
func asError(t *testing.T, err error) *provider.Error {
	t.Helper()
	pe, ok := provider.AsError(err)
	if !ok {
		t.Fatalf("err = %v (%T), want a *provider.Error", err, err)
	}
	return pe
}

// answerOf returns the control plane's error answer behind err.
func answerOf(t *testing.T, err error) *AnswerError {
	t.Helper()
	var ae *AnswerError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an error answer of the control plane", err)
	}
	return ae
}

// A wake is signed, answered with the home's endpoint and ref, and a
// second wake of a running home does not start it again.
func TestWakeSigned(t *testing.T) {
	cp := newControlPlane(t)
	p := newClient(t, cp.base, nil)
	res, err := p.Wake(ctxFor(t, 10*time.Second), alice)
	if err != nil {
		t.Fatal(err)
	}
	if res.Endpoint != cp.homeURL || res.State != provider.StateRunning || res.Ref != "m-1" {
		t.Fatalf("wake = %+v, want running at %s with ref m-1", res, cp.homeURL)
	}
	if _, err := p.Wake(ctxFor(t, 10*time.Second), alice); err != nil {
		t.Fatal(err)
	}
	if n := cp.wakes("alice"); n != 1 {
		t.Fatalf("home started %d times, want 1", n)
	}
	seen := cp.requests()
	if len(seen) != 2 || seen[0].target != "/cp/homes/alice/wake" || seen[0].key == "" || seen[0].key == seen[1].key {
		t.Fatalf("requests = %+v, want two wakes with distinct idempotency keys", seen)
	}
	cp.mu.Lock()
	body := cp.bodies[0]
	cp.mu.Unlock()
	if body.Image != alice.Image || string(body.Options) != `{"size":"small"}` || body.Deadline.IsZero() {
		t.Fatalf("wake body = %+v, want the image, the options and a deadline", body)
	}
}

// An answer lost after the control plane did the work is retried with
// the same idempotency key (a fresh nonce and signature), and the home is
// started once.
func TestRetryDoesNotDoubleWake(t *testing.T) {
	cp := newControlPlane(t)
	cp.dropFirst = true
	p := newClient(t, cp.base, nil)
	if _, err := p.Wake(ctxFor(t, 10*time.Second), alice); err != nil {
		t.Fatal(err)
	}
	if n := cp.wakes("alice"); n != 1 {
		t.Fatalf("home started %d times, want 1", n)
	}
	seen := cp.requests()
	if len(seen) != 2 || seen[0].key != seen[1].key || seen[0].nonce == seen[1].nonce {
		t.Fatalf("requests = %+v, want one retry with the same key and a new nonce", seen)
	}
}

// A slow wake answered 202 is polled until the home runs: by plain
// polling when the control plane answers at once, by one long poll when
// it holds the answer.
func TestSlowWakePolls(t *testing.T) {
	for _, tc := range []struct {
		name     string
		longPoll bool
		polls    int // status polls seen before the home runs
	}{
		{"polling", false, 3},
		{"long poll", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := newControlPlane(t)
			cp.manual, cp.longPoll = true, tc.longPoll
			cp.polled = make(chan string, 100)
			p := newClient(t, cp.base, nil)
			type out struct {
				res provider.Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := p.Wake(ctxFor(t, 10*time.Second), alice)
				done <- out{res, err}
			}()
			for i := 0; i < tc.polls; i++ {
				target := <-cp.polled
				if !strings.Contains(target, "wait=running&timeout=") {
					t.Errorf("poll %q, want wait=running and a timeout", target)
				}
			}
			cp.finish("alice")
			o := <-done
			if o.err != nil || o.res.Endpoint != cp.homeURL {
				t.Fatalf("wake = %+v, %v; want running at %s", o.res, o.err, cp.homeURL)
			}
			if tc.longPoll && len(cp.polled) != 0 {
				t.Fatalf("%d more polls after the long poll, want none", len(cp.polled))
			}
		})
	}
}

// A wake whose home never runs fails when its deadline passes, saying
// what the control plane last reported, as a deadline error.
func TestWakePastDeadline(t *testing.T) {
	cp := newControlPlane(t)
	cp.manual, cp.longPoll = true, true
	p := newClient(t, cp.base, nil)
	_, err := p.Wake(ctxFor(t, 1500*time.Millisecond), alice)
	e := asError(t, err)
	if e.Reason != ReasonDeadline || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "still reports starting") {
		t.Fatalf("err = %v, want a deadline error that says the home was still starting", err)
	}
}

// The control plane's code, reason and Retry-After reach the caller; a
// Retry-After that fits the deadline is waited out and the call retried.
func TestRetryAfter(t *testing.T) {
	t.Run("past the deadline", func(t *testing.T) {
		cp := newControlPlane(t)
		cp.refuse, cp.refuseSt = &Answer{Code: provider.ReasonCapacity, Reason: "the region is full", RetryAfter: 30}, http.StatusServiceUnavailable
		p := newClient(t, cp.base, nil)
		_, err := p.Wake(ctxFor(t, 5*time.Second), alice)
		e, ae := asError(t, err), answerOf(t, err)
		if e.Reason != provider.ReasonCapacity || e.RetryAfter != 30*time.Second || ae.Status != 503 || ae.Reason != "the region is full" {
			t.Fatalf("err = %v, want 503 capacity, the region is full, retry after 30s", err)
		}
		if n := len(cp.requests()); n != 1 {
			t.Fatalf("%d requests, want 1: a retry after 30s does not fit a 5s deadline", n)
		}
	})
	t.Run("within the deadline", func(t *testing.T) {
		cp := newControlPlane(t)
		cp.refuse, cp.refuseSt, cp.refuseN = &Answer{Code: "slow_down", RetryAfter: 1}, http.StatusTooManyRequests, 1
		p := newClient(t, cp.base, nil)
		if _, err := p.Wake(ctxFor(t, 10*time.Second), alice); err != nil {
			t.Fatal(err)
		}
		if n := len(cp.requests()); n != 2 {
			t.Fatalf("%d requests, want 2 (a 429, then the wake)", n)
		}
	})
}

// A client with the wrong secret, or a clock outside the replay window,
// is refused with a hint; nothing is woken.
func TestRefusedSignature(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"wrong secret", func(c *Config) { c.Secret = []byte("another-secret-of-16+") }},
		{"stale clock", func(c *Config) { c.Now = func() time.Time { return time.Now().Add(-10 * time.Minute) } }},
		{"future clock", func(c *Config) { c.Now = func() time.Time { return time.Now().Add(10 * time.Minute) } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := newControlPlane(t)
			p := newClient(t, cp.base, tc.mod)
			_, err := p.Wake(ctxFor(t, 5*time.Second), alice)
			if e, ae := asError(t, err), answerOf(t, err); ae.Status != http.StatusUnauthorized || e.Reason != provider.ReasonRefused || e.Hint == "" {
				t.Fatalf("err = %v, want 401 %s with a hint", err, provider.ReasonRefused)
			}
			if n := cp.wakes("alice"); n != 0 {
				t.Fatalf("home started %d times, want 0", n)
			}
		})
	}
}

// Suspend reads paused as suspended; a control plane that cannot suspend
// answers 501 and the caller gets ErrUnsupported; stop waits until the
// home is stopped and reports it proven.
func TestSuspendAndStop(t *testing.T) {
	cp := newControlPlane(t)
	p := newClient(t, cp.base, nil)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := p.Wake(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := p.Suspend(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Status(ctx, alice); err != nil || st.State != provider.StateSuspended {
		t.Fatalf("status = %+v, %v; want suspended (the control plane says paused)", st, err)
	}
	proven, err := p.Stop(ctx, alice)
	if err != nil || !proven {
		t.Fatalf("stop = %v, %v; want proven", proven, err)
	}
	cp.noSuspend = true
	if err := p.Suspend(ctx, alice); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("suspend = %v, want ErrUnsupported", err)
	}
}

// Version comes from the control plane, or from the home itself when the
// control plane does not know it.
func TestVersion(t *testing.T) {
	cp := newControlPlane(t)
	p := newClient(t, cp.base, nil)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := p.Recreate(ctx, provider.Spec{ID: "alice", Target: "alice", Version: "3"}); err != nil {
		t.Fatal(err)
	}
	if v, err := p.Version(ctx, alice); err != nil || v != "3" {
		t.Fatalf("version = %q, %v; want 3 from the control plane", v, err)
	}
	cp.mu.Lock()
	cp.home("alice").version = ""
	cp.mu.Unlock()
	if v, err := p.Version(ctx, alice); err != nil || v != "7" {
		t.Fatalf("version = %q, %v; want 7 from the home", v, err)
	}
}

// A control plane that cannot be reached fails the wake with a code and
// a hint, within the deadline.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := newClient(t, "http://"+addr, nil)
	_, err = p.Wake(ctxFor(t, 10*time.Second), alice)
	if e := asError(t, err); e.Reason != provider.ReasonUnavailable || e.Hint == "" {
		t.Fatalf("err = %v, want %s with a hint", err, provider.ReasonUnavailable)
	}
}

// Control planes' states read as the engine's.
func TestNormalizeState(t *testing.T) {
	for in, want := range map[string]provider.State{
		"running": provider.StateRunning, "started": provider.StateRunning,
		"paused": provider.StateSuspended, "standby": provider.StateSuspended, "Suspended": provider.StateSuspended,
		"stopped": provider.StateStopped, "destroyed": provider.StateStopped,
		"failed": provider.StateFailed, "starting": provider.StateUnknown, "weird": provider.StateUnknown,
	} {
		if got := NormalizeState(in); got != want {
			t.Errorf("NormalizeState(%q) = %s, want %s", in, got, want)
		}
	}
}

// New names the field at fault.
func TestNewChecks(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{BaseURL: "ftp://x", Secret: testSecret}, "base_url"},
		{Config{BaseURL: "", Secret: testSecret}, "base_url"},
		{Config{BaseURL: "http://cp", Secret: []byte("short")}, "secret"},
	} {
		if _, err := New(tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
}
