package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

const (
	probeTestToken  = "relay-secret"
	probeTestHeader = "X-Wakegate-Relay"
	probeTestPath   = "/node/alice"
)

// probeTestRelay is the header every test probe sends.
func probeTestRelay() http.Header {
	h := http.Header{}
	h.Set(probeTestHeader, probeTestToken)
	return h
}

// probeTestAuthorised reports whether r is a probe for probeTestPath with the
// relay token, the only request the test servers answer.
func probeTestAuthorised(r *http.Request) bool {
	return r.URL.Path == probeTestPath && r.Header.Get(probeTestHeader) == probeTestToken
}

// probeTestHTTP starts an http server that answers authorised probes with the
// status status(n) for the n-th of them (1-based) and counts them.
func probeTestHTTP(t testing.TB, status func(n int64) int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !probeTestAuthorised(r) {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status(hits.Add(1)))
		_, _ = w.Write([]byte("body that the probe drains"))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// probeTestWSOptions shapes a test WebSocket server.
type probeTestWSOptions struct {
	// reject, if set, answers the n-th authorised request (1-based) with a
	// plain HTTP status instead of an upgrade when it returns non-zero.
	reject func(n int64) int
	// first makes the server send a first message right after the upgrade.
	first bool
	// closeAtOnce makes the server close the socket right after the upgrade.
	closeAtOnce bool
	// ponged, if set, makes the server ping after the upgrade and call
	// ponged when the pong comes back: the client is then reading.
	ponged func()
}

// probeTestWS starts a WebSocket server at probeTestPath. It counts
// authorised requests and reports, for every upgraded socket, the close code
// the client sent (-1 when the socket ended without a close frame).
func probeTestWS(t testing.TB, o probeTestWSOptions) (*httptest.Server, *atomic.Int64, <-chan int) {
	t.Helper()
	var hits atomic.Int64
	codes := make(chan int, 1024)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !probeTestAuthorised(r) {
			http.NotFound(w, r)
			return
		}
		n := hits.Add(1)
		if o.reject != nil {
			if code := o.reject(n); code != 0 {
				http.Error(w, "not yet", code)
				return
			}
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if o.ponged != nil {
			conn.SetPongHandler(func(string) error {
				o.ponged()
				return nil
			})
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				codes <- -1
				return
			}
		}
		if o.closeAtOnce {
			return
		}
		if o.first {
			if err := conn.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
				codes <- -1
				return
			}
		}
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
					codes <- ce.Code
				} else {
					codes <- -1
				}
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits, codes
}

// probeTestClosedAddr returns the address of a loopback port that was just
// opened and closed, so that nothing listens on it.
func probeTestClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// probeTestTCP starts a raw TCP listener that accepts and closes connections
// and counts them.
func probeTestTCP(t testing.TB) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), &accepted
}

// probeTestExpired returns a context whose deadline has already passed.
func probeTestExpired(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	t.Cleanup(cancel)
	return ctx
}

// probeTestGuard returns a context that ends the test's probe if the
// behaviour under test is missing, so a broken probe fails instead of hanging.
func probeTestGuard(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// probeTestCode waits for the close code a test WebSocket server saw.
func probeTestCode(t *testing.T, codes <-chan int) int {
	t.Helper()
	select {
	case c := <-codes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the socket end")
		return 0
	}
}

func TestProbeDefaults(t *testing.T) {
	got := probeDefaults(Spec{})
	want := Spec{
		Kind:           WS,
		AttemptTimeout: 2 * time.Second,
		Settle:         300 * time.Millisecond,
		MinPause:       2 * time.Millisecond,
		MaxPause:       100 * time.Millisecond,
	}
	if got.Kind != want.Kind || got.AttemptTimeout != want.AttemptTimeout || got.Settle != want.Settle ||
		got.MinPause != want.MinPause || got.MaxPause != want.MaxPause {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	raised := probeDefaults(Spec{MinPause: time.Second})
	if raised.MaxPause != time.Second {
		t.Errorf("MaxPause below MinPause: got %v, want it raised to %v", raised.MaxPause, time.Second)
	}
	kept := probeDefaults(Spec{Kind: TCP, AttemptTimeout: 5 * time.Second, MinPause: time.Millisecond, MaxPause: time.Minute})
	if kept.Kind != TCP || kept.AttemptTimeout != 5*time.Second || kept.MinPause != time.Millisecond || kept.MaxPause != time.Minute {
		t.Errorf("set fields changed: %+v", kept)
	}
}

func TestProbeURL(t *testing.T) {
	cases := []struct {
		kind     Kind
		endpoint string
		path     string
		want     string
	}{
		{WS, "http://127.0.0.1:8080", "/node/alice", "ws://127.0.0.1:8080/node/alice"},
		{WS, "https://home.internal", "/node/alice", "wss://home.internal/node/alice"},
		{WS, "http://127.0.0.1:8080/base/", "/node/a%2Fb", "ws://127.0.0.1:8080/base/node/a%2Fb"},
		{HTTP, "http://127.0.0.1:8080", "/healthz?deep=1", "http://127.0.0.1:8080/healthz?deep=1"},
		{HTTP, "ws://127.0.0.1:8080/", "", "http://127.0.0.1:8080/"},
		{TCP, "http://127.0.0.1:8080/x", "", "127.0.0.1:8080"},
		{TCP, "https://home.internal", "", "home.internal:443"},
		{TCP, "127.0.0.1:9", "", "127.0.0.1:9"},
	}
	for _, c := range cases {
		r, err := probeNewRun(probeDefaults(Spec{Kind: c.kind, Endpoint: c.endpoint, Path: c.path}))
		if err != nil {
			t.Errorf("%s %s %s: %v", c.kind, c.endpoint, c.path, err)
			continue
		}
		if r.target != c.want {
			t.Errorf("%s %s %s: target %q, want %q", c.kind, c.endpoint, c.path, r.target, c.want)
		}
		r.close()
	}
}

func TestProbeRejectsUnusableSpec(t *testing.T) {
	cases := map[string]Spec{
		"unknown kind":          {Kind: "icmp", Endpoint: "http://127.0.0.1:1"},
		"no endpoint":           {Kind: HTTP},
		"ftp scheme":            {Kind: WS, Endpoint: "ftp://127.0.0.1:1"},
		"path with host":        {Kind: HTTP, Endpoint: "http://127.0.0.1:1", Path: "http://elsewhere/"},
		"tcp without port":      {Kind: TCP, Endpoint: "127.0.0.1"},
		"settle beyond timeout": {Kind: WS, Endpoint: "http://127.0.0.1:1", Settle: time.Second, AttemptTimeout: time.Second},
	}
	for name, spec := range cases {
		res, err := Run(probeTestGuard(t), spec, nil)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if res.Attempts != 0 {
			t.Errorf("%s: %d attempts on a spec that cannot be attempted", name, res.Attempts)
		}
	}
}

func TestProbeEachKindPasses(t *testing.T) {
	httpSrv, httpHits := probeTestHTTP(t, func(int64) int { return http.StatusOK })
	wsFirst, wsFirstHits, _ := probeTestWS(t, probeTestWSOptions{first: true})
	wsQuiet, wsQuietHits, _ := probeTestWS(t, probeTestWSOptions{})
	tcpAddr, accepted := probeTestTCP(t)

	cases := []struct {
		name   string
		spec   Spec
		hits   *atomic.Int64
		status int
	}{
		{"http", Spec{Kind: HTTP, Endpoint: httpSrv.URL, Path: probeTestPath}, httpHits, http.StatusOK},
		{"ws first frame", Spec{Endpoint: wsFirst.URL, Path: probeTestPath}, wsFirstHits, http.StatusSwitchingProtocols},
		{"ws quiet", Spec{Kind: WS, Endpoint: wsQuiet.URL, Path: probeTestPath, Settle: 20 * time.Millisecond}, wsQuietHits, http.StatusSwitchingProtocols},
		{"tcp", Spec{Kind: TCP, Endpoint: "http://" + tcpAddr}, accepted, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Header = probeTestRelay()
			before := c.hits.Load()
			res, err := Run(probeTestGuard(t), c.spec, nil)
			if err != nil {
				t.Fatalf("probe: %v (result %+v)", err, res)
			}
			if res.Attempts != 1 || res.Status != c.status || res.Signalled || res.Last != nil {
				t.Errorf("result %+v, want 1 attempt, status %d, not signalled, no error", res, c.status)
			}
			if c.name != "tcp" { // the tcp listener's count is checked below
				if got := c.hits.Load() - before; got != 1 {
					t.Errorf("server saw %d probes, want 1", got)
				}
			}
		})
	}
	// The tcp listener counts in its own goroutine, which says nothing
	// when it has: ask until it has counted.
	testbin.Eventually(t, "the tcp listener's accept", func() bool { return accepted.Load() > 0 })
	if accepted.Load() != 1 {
		t.Errorf("tcp listener accepted %d connections, want 1", accepted.Load())
	}
}

func TestProbeHTTPStatusRules(t *testing.T) {
	var redirected atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		redirected.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/moved")
		}
		w.WriteHeader(code)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	cases := []struct {
		code    int
		uiPass  bool
		apiPass bool
	}{
		{200, true, true},
		{204, true, true},
		{302, true, true},
		{307, true, true},
		{401, false, true},
		{403, false, true},
		{400, false, false},
		{404, false, false},
		{500, false, false},
		{502, false, false},
		{503, false, false},
	}
	for _, c := range cases {
		for _, api := range []bool{false, true} {
			want := c.uiPass
			if api {
				want = c.apiPass
			}
			spec := Spec{Kind: HTTP, Endpoint: srv.URL, Path: "/status/" + strconv.Itoa(c.code), API: api}
			// An expired context allows exactly one attempt, which is all a
			// status rule needs.
			res, err := Run(probeTestExpired(t), spec, nil)
			if res.Attempts != 1 || res.Status != c.code {
				t.Errorf("status %d api=%v: result %+v, want one attempt seeing %d", c.code, api, res, c.code)
			}
			if want && (err != nil || res.Last != nil) {
				t.Errorf("status %d api=%v: want pass, got %v", c.code, api, err)
			}
			if !want && (err == nil || res.Last == nil || !errors.Is(err, context.DeadlineExceeded)) {
				t.Errorf("status %d api=%v: want failure wrapping the deadline, got %v (last %v)", c.code, api, err, res.Last)
			}
		}
	}
	if n := redirected.Load(); n != 0 {
		t.Errorf("the probe followed %d redirects", n)
	}
}

func TestProbeWSFirstFramePassesAtOnce(t *testing.T) {
	srv, hits, codes := probeTestWS(t, probeTestWSOptions{first: true})
	// The settle window outlasts the guard: only the first frame can pass.
	spec := Spec{Endpoint: srv.URL, Path: probeTestPath, Header: probeTestRelay(), Settle: 30 * time.Second, AttemptTimeout: time.Minute}
	res, err := Run(probeTestGuard(t), spec, nil)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if res.Attempts != 1 || res.Status != http.StatusSwitchingProtocols || hits.Load() != 1 {
		t.Errorf("result %+v, server hits %d; want one upgraded attempt", res, hits.Load())
	}
	if code := probeTestCode(t, codes); code != websocket.CloseNormalClosure {
		t.Errorf("server saw close code %d, want %d", code, websocket.CloseNormalClosure)
	}
}

func TestProbeWSQuietPassesAfterSettle(t *testing.T) {
	srv, hits, codes := probeTestWS(t, probeTestWSOptions{})
	spec := Spec{Endpoint: srv.URL, Path: probeTestPath, Header: probeTestRelay(), Settle: 20 * time.Millisecond}
	res, err := Run(probeTestGuard(t), spec, nil)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if res.Attempts != 1 || res.Status != http.StatusSwitchingProtocols || hits.Load() != 1 {
		t.Errorf("result %+v, server hits %d; want one upgraded attempt", res, hits.Load())
	}
	if code := probeTestCode(t, codes); code != websocket.CloseNormalClosure {
		t.Errorf("server saw close code %d, want %d", code, websocket.CloseNormalClosure)
	}
}

func TestProbeWSFailures(t *testing.T) {
	never, _, _ := probeTestWS(t, probeTestWSOptions{reject: func(int64) int { return http.StatusServiceUnavailable }})
	hangUp, _, _ := probeTestWS(t, probeTestWSOptions{closeAtOnce: true})
	open, _, _ := probeTestWS(t, probeTestWSOptions{first: true})

	cases := []struct {
		name   string
		spec   Spec
		status int
	}{
		{"handshake 404 on another target", Spec{Endpoint: open.URL, Path: "/node/bob", Header: probeTestRelay()}, http.StatusNotFound},
		{"handshake 404 without the relay token", Spec{Endpoint: open.URL, Path: probeTestPath}, http.StatusNotFound},
		{"handshake 503", Spec{Endpoint: never.URL, Path: probeTestPath, Header: probeTestRelay()}, http.StatusServiceUnavailable},
		{"closed during settle", Spec{Endpoint: hangUp.URL, Path: probeTestPath, Header: probeTestRelay(), Settle: 5 * time.Second, AttemptTimeout: 10 * time.Second}, http.StatusSwitchingProtocols},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Run(probeTestExpired(t), c.spec, nil)
			if err == nil || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want a failure wrapping the deadline, got %v", err)
			}
			if res.Attempts != 1 || res.Status != c.status || res.Last == nil || res.Signalled {
				t.Errorf("result %+v, want one failed attempt with status %d", res, c.status)
			}
		})
	}
}

func TestProbePassesAfterAttempts(t *testing.T) {
	const failing = 4
	notYet := func(n int64) int {
		if n <= failing {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	httpSrv, httpHits := probeTestHTTP(t, func(n int64) int {
		if code := notYet(n); code != 0 {
			return code
		}
		return http.StatusNoContent
	})
	wsSrv, wsHits, _ := probeTestWS(t, probeTestWSOptions{reject: notYet, first: true})

	cases := []struct {
		name   string
		spec   Spec
		hits   *atomic.Int64
		status int
	}{
		{"http", Spec{Kind: HTTP, Endpoint: httpSrv.URL}, httpHits, http.StatusNoContent},
		{"ws", Spec{Kind: WS, Endpoint: wsSrv.URL}, wsHits, http.StatusSwitchingProtocols},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Path = probeTestPath
			c.spec.Header = probeTestRelay()
			res, err := Run(probeTestGuard(t), c.spec, nil)
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			if res.Attempts != failing+1 || res.Status != c.status || res.Last != nil || res.Signalled {
				t.Errorf("result %+v, want %d attempts ending in status %d", res, failing+1, c.status)
			}
			if got := c.hits.Load(); got != failing+1 {
				t.Errorf("server saw %d attempts, want %d", got, failing+1)
			}
		})
	}
}

func TestProbeDoneContextMakesOneAttempt(t *testing.T) {
	never, neverHits := probeTestHTTP(t, func(int64) int { return http.StatusInternalServerError })
	healthy, healthyHits := probeTestHTTP(t, func(int64) int { return http.StatusOK })
	wsNever, wsNeverHits, _ := probeTestWS(t, probeTestWSOptions{reject: func(int64) int { return http.StatusBadGateway }})
	wsHealthy, wsHealthyHits, _ := probeTestWS(t, probeTestWSOptions{})

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	cases := []struct {
		name    string
		ctx     context.Context
		spec    Spec
		hits    *atomic.Int64
		pass    bool
		wantErr error
	}{
		{"http never ready, deadline passed", probeTestExpired(t), Spec{Kind: HTTP, Endpoint: never.URL}, neverHits, false, context.DeadlineExceeded},
		{"http never ready, cancelled", cancelled, Spec{Kind: HTTP, Endpoint: never.URL}, neverHits, false, context.Canceled},
		{"http healthy, deadline passed", probeTestExpired(t), Spec{Kind: HTTP, Endpoint: healthy.URL}, healthyHits, true, nil},
		{"ws never ready, deadline passed", probeTestExpired(t), Spec{Endpoint: wsNever.URL}, wsNeverHits, false, context.DeadlineExceeded},
		{"ws healthy, cancelled", cancelled, Spec{Endpoint: wsHealthy.URL, Settle: 20 * time.Millisecond}, wsHealthyHits, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Path = probeTestPath
			c.spec.Header = probeTestRelay()
			before := c.hits.Load()
			res, err := Run(c.ctx, c.spec, nil)
			if got := c.hits.Load() - before; got != 1 {
				t.Errorf("server saw %d attempts, want exactly 1", got)
			}
			if res.Attempts != 1 {
				t.Errorf("result %+v, want 1 attempt", res)
			}
			if c.pass {
				if err != nil {
					t.Errorf("want pass, got %v", err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) || res.Last == nil || !errors.Is(err, res.Last) {
				t.Errorf("error %v (last %v), want one wrapping %v and the last attempt's error", err, res.Last, c.wantErr)
			}
		})
	}
}

// TestProbeClosedPortUntilDeadline runs in a synctest bubble: a refused dial
// takes no fake time, so the attempt count follows the pause schedule alone.
// With MinPause 10ms and MaxPause 80ms, attempts start at 0, 10, 30, 70, 150,
// 230, ... 950 ms: 15 of them before the 1s deadline.
func TestProbeClosedPortUntilDeadline(t *testing.T) {
	addr := probeTestClosedAddr(t)
	for _, kind := range []Kind{TCP, HTTP, WS} {
		t.Run(string(kind), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				// The port watch is off: this test is about the pause schedule,
				// and under fake time the watch would dial the closed port
				// hundreds of times in an instant, hitting whatever parallel
				// test reuses that port number.
				spec := Spec{Kind: kind, Endpoint: "http://" + addr, Path: probeTestPath, MinPause: 10 * time.Millisecond, MaxPause: 80 * time.Millisecond, PortWatch: -1}
				res, err := Run(ctx, spec, nil)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error %v does not wrap the deadline", err)
				}
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("error %v does not wrap the refused dial", err)
				}
				if _, ok := errors.AsType[*net.OpError](err); !ok {
					t.Errorf("error %v does not wrap the dial's *net.OpError", err)
				}
				if !errors.Is(res.Last, syscall.ECONNREFUSED) || res.Status != 0 || res.Signalled {
					t.Errorf("result %+v, want the refused dial as last error and no status", res)
				}
				if res.Attempts != 15 {
					t.Errorf("%d attempts, want 15", res.Attempts)
				}
			})
		})
	}
}

// TestProbeSignalInPause closes ready at 100ms of fake time, during the pause
// that follows the attempts at 0, 10, 30 and 70 ms: the fifth attempt runs
// at once, at 100 ms instead of 150, and the port stays closed, so the probe
// still fails at its deadline with the later attempts at 180, 260, ... 980.
func TestProbeSignalInPause(t *testing.T) {
	addr := probeTestClosedAddr(t)
	synctest.Test(t, func(t *testing.T) {
		ready := make(chan struct{})
		go func() {
			time.Sleep(100 * time.Millisecond)
			close(ready)
		}()
		spec := Spec{Kind: TCP, Endpoint: addr, MinPause: 10 * time.Millisecond, MaxPause: 80 * time.Millisecond, PortWatch: -1}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		res, err := Run(ctx, spec, ready)
		if err == nil {
			t.Fatal("a ready signal made a probe of a closed port pass")
		}
		if !res.Signalled || res.Attempts != 16 || !errors.Is(res.Last, syscall.ECONNREFUSED) {
			t.Errorf("result %+v, want signalled and 16 refused attempts (one more than without the signal)", res)
		}
	})
}

// A ready signal makes the next attempt run at once: with an hour-long
// pause, only the signal can start the second attempt before the guard
// ends the probe.
func TestProbeReadySignalRunsNextAttemptAtOnce(t *testing.T) {
	ready := make(chan struct{})
	var healthy atomic.Bool
	srv, hits := probeTestHTTP(t, func(n int64) int {
		if healthy.Load() {
			return http.StatusOK
		}
		if n == 1 {
			// The home becomes ready and says so while the probe's first
			// attempt fails.
			healthy.Store(true)
			close(ready)
		}
		return http.StatusServiceUnavailable
	})
	spec := Spec{Kind: HTTP, Endpoint: srv.URL, Path: probeTestPath, Header: probeTestRelay(),
		MinPause: time.Hour, MaxPause: time.Hour}
	res, err := Run(probeTestGuard(t), spec, ready)
	if err != nil {
		t.Fatalf("probe: %v (result %+v, hits %d)", err, res, hits.Load())
	}
	if !res.Signalled || res.Attempts != 2 || res.Status != http.StatusOK {
		t.Errorf("result %+v, want a second attempt at once after the signal, passing", res)
	}
}

// A ready signal never declares a home ready: a home that signals but whose
// serving path keeps failing fails the probe.
func TestProbeReadySignalNeverPassesAlone(t *testing.T) {
	for _, before := range []bool{true, false} {
		name := "signalled while probing"
		if before {
			name = "signalled before the call"
		}
		t.Run(name, func(t *testing.T) {
			ready := make(chan struct{})
			if before {
				close(ready)
			}
			var once sync.Once
			srv, hits := probeTestHTTP(t, func(n int64) int {
				if n == 2 && !before {
					once.Do(func() { close(ready) })
				}
				return http.StatusNotFound
			})
			spec := Spec{Kind: HTTP, Endpoint: srv.URL, Path: probeTestPath, Header: probeTestRelay()}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			res, err := Run(ctx, spec, ready)
			if err == nil || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("probe of a home that signals but answers 404: %v (result %+v), want a failure at the deadline", err, res)
			}
			// The last attempt may be cut short by the deadline; the 404s
			// before it are in the error.
			var ps StatusError
			if !res.Signalled || res.Attempts < 2 || hits.Load() < 2 || !errors.As(err, &ps) || int(ps) != http.StatusNotFound {
				t.Errorf("result %+v, error %v, server hits %d; want signalled, attempts going on, the 404 in the error", res, err, hits.Load())
			}
		})
	}
}

// probeTestHold starts a raw TCP listener that calls trip on every accepted
// connection and then holds it open without answering.
func probeTestHold(t *testing.T, trip func()) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			trip()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestProbeCutShort checks that a cancelled ctx ends an attempt in flight,
// in each place an attempt can wait (a ready signal does not: it only ends
// a pause). The attempt timeout
// and settle window are an hour long, so only the interruption can end the
// attempt: without it the test runs into the test binary's timeout.
func TestProbeCutShort(t *testing.T) {
	servers := []struct {
		name  string
		kind  Kind
		start func(t *testing.T, trip func()) (endpoint string, codes <-chan int)
	}{
		{"http response", HTTP, func(t *testing.T, trip func()) (string, <-chan int) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				trip()
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			return srv.URL, nil
		}},
		{"ws handshake", WS, func(t *testing.T, trip func()) (string, <-chan int) {
			return "http://" + probeTestHold(t, trip), nil
		}},
		{"ws settle", WS, func(t *testing.T, trip func()) (string, <-chan int) {
			srv, _, codes := probeTestWS(t, probeTestWSOptions{ponged: trip})
			return srv.URL, codes
		}},
	}
	for _, s := range servers {
		t.Run(s.name+" cut by ctx", func(t *testing.T) {
			ctx, cancel := context.WithCancel(probeTestGuard(t))
			defer cancel()
			var once sync.Once
			trip := func() { once.Do(cancel) }
			endpoint, codes := s.start(t, trip)
			spec := Spec{Kind: s.kind, Endpoint: endpoint, Path: probeTestPath, Header: probeTestRelay(),
				AttemptTimeout: time.Hour, Settle: time.Hour - time.Minute}
			res, err := Run(ctx, spec, make(chan struct{}))
			if res.Attempts != 1 || !errors.Is(res.Last, context.Canceled) {
				t.Errorf("result %+v, want one attempt cut short with context.Canceled", res)
			}
			if !errors.Is(err, context.Canceled) || res.Signalled {
				t.Errorf("want an error wrapping context.Canceled, got %v (result %+v)", err, res)
			}
			if codes != nil {
				if code := probeTestCode(t, codes); code != websocket.CloseNormalClosure {
					t.Errorf("server saw close code %d, want %d", code, websocket.CloseNormalClosure)
				}
			}
		})
	}
}

func TestProbeLeavesNoGoroutines(t *testing.T) {
	ok, _ := probeTestHTTP(t, func(int64) int { return http.StatusOK })
	bad, _ := probeTestHTTP(t, func(int64) int { return http.StatusBadGateway })
	wsFirst, _, _ := probeTestWS(t, probeTestWSOptions{first: true})
	wsQuiet, _, _ := probeTestWS(t, probeTestWSOptions{})
	tcpAddr, _ := probeTestTCP(t)
	closed := probeTestClosedAddr(t)
	relay := probeTestRelay()

	baseline := runtime.NumGoroutine()

	specs := []Spec{
		{Kind: HTTP, Endpoint: ok.URL, Path: probeTestPath, Header: relay},
		{Kind: WS, Endpoint: wsFirst.URL, Path: probeTestPath, Header: relay},
		{Kind: WS, Endpoint: wsQuiet.URL, Path: probeTestPath, Header: relay, Settle: 5 * time.Millisecond},
		{Kind: TCP, Endpoint: tcpAddr},
	}
	for _, s := range specs {
		if _, err := Run(probeTestGuard(t), s, make(chan struct{})); err != nil {
			t.Fatalf("probe %s: %v", s.Kind, err)
		}
	}
	failing := []Spec{
		{Kind: HTTP, Endpoint: bad.URL, Path: probeTestPath, Header: relay},
		{Kind: WS, Endpoint: ok.URL, Path: probeTestPath, Header: relay},
		{Kind: TCP, Endpoint: closed},
		{Kind: WS, Endpoint: "http://" + closed},
	}
	for _, s := range failing {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		_, err := Run(ctx, s, make(chan struct{}))
		cancel()
		if err == nil {
			t.Fatalf("probe %s %s passed, want a failure", s.Kind, s.Endpoint)
		}
	}
	ready := make(chan struct{})
	close(ready)
	sctx, scancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	res, err := Run(sctx, Spec{Kind: HTTP, Endpoint: bad.URL, Path: probeTestPath, Header: relay}, ready)
	scancel()
	if err == nil || !res.Signalled {
		t.Fatalf("signalled probe of a failing home: %v (%+v), want a signalled failure", err, res)
	}

	// Connections closed by the probe end their server-side goroutines a
	// moment later; wait for them.
	now := runtime.NumGoroutine()
	testbin.Poll(2*time.Second, 10*time.Millisecond, func() bool {
		now = runtime.NumGoroutine()
		return now <= baseline
	})
	if now > baseline {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the probes, %d before:\n%s", now, baseline, buf[:runtime.Stack(buf, true)])
	}
}
