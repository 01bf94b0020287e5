package attack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// relay is the home's relay token: it must never reach a caller.
const relay = "attack-relay-token-5f1c0e9a7b"

// seen is a request as an upstream received it.
type seen struct {
	URI    string
	Path   string
	Header http.Header
}

// upstream is a real HTTP server that records what reaches it; on some
// paths it reflects the relay header it received, in every place a
// response can carry it.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.UserAgent(), "wakegate-") { // the gateway's own probes
			_, _ = io.WriteString(w, "ok")
			return
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{URI: r.RequestURI, Path: r.URL.Path, Header: r.Header.Clone()})
		u.mu.Unlock()
		tok := r.Header.Get("X-Wakegate-Relay")
		switch {
		case strings.HasSuffix(r.URL.Path, "/reflect"):
			w.Header().Set("Link", "</x>; rel=preload; tok="+tok)
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("X-Echo", tok)
			w.Header().Set("Set-Cookie", "t="+tok)
			w.Header().Set("Trailer", "X-Trail")
			_, _ = io.WriteString(w, "body "+tok+" end")
			w.Header().Set("X-Trail", tok)
		case strings.HasSuffix(r.URL.Path, "/fail"):
			http.Error(w, "failed with "+tok, http.StatusInternalServerError)
		case strings.HasSuffix(r.URL.Path, "/big"):
			// A response far larger than any socket buffer, for slow readers.
			chunk := strings.Repeat("b", 32<<10)
			for range 512 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		case strings.HasSuffix(r.URL.Path, "/flood"):
			floodWebSocket(w, r)
		case strings.HasSuffix(r.URL.Path, "/ws"):
			// A home that answers an upgrade with something else than 101.
			w.Header().Set("X-Echo", tok)
			http.Error(w, "no upgrade here "+tok, http.StatusForbidden)
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) all() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

// suite is a gateway with the static home h1 at /node/h (relay token
// relay) and the app a, each on its own upstream.
type suite struct {
	g         *gateway.Gateway
	addr      string
	home, app *upstream
	logs      *testbin.LogBuffer
	// shutdown cancels Serve and returns what it returned (once).
	shutdown func() error
}

func start(t *testing.T) *suite {
	t.Helper()
	t.Setenv("ATTACK_RELAY", relay)
	s := &suite{home: newUpstream(t), app: newUpstream(t), logs: &testbin.LogBuffer{}}
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
log: {access: false}
server:
  read_header_timeout: 1s
  max_header_bytes: 4KiB
  max_body_bytes: 1KiB
  min_body_rate: 100
  min_response_rate: 64KiB
  min_rate_grace: 1s
  drain_grace: 2s
  max_conns_per_client: 1000
  websocket_origins: ["https://app.example"]
homes:
  - {id: h1, target: h, provider: static, endpoint: %q, probe: tcp, relay_token: "env:ATTACK_RELAY"}
apps:
  - {slug: a, upstream: %q, kind: api}
`, filepath.Join(t.TempDir(), "data"), s.home.URL, s.app.URL)
	cfg, err := all.Load("attack.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(s.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	s.shutdown = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", s.logs)
		}
	})
	s.addr, s.g = ln.Addr().String(), g
	return s
}

// answer is one raw exchange: the response as parsed, and every byte the
// gateway wrote (to search for leaks).
type answer struct {
	res    *http.Response
	body   string
	raw    string
	closed bool // the gateway closed the connection after the response
}

// exchange sends raw on a new connection and reads one response.
func (s *suite) exchange(t *testing.T, raw string) answer {
	t.Helper()
	return s.exchangeWait(t, raw, false)
}

// exchangeWait is exchange that, with waitClose, also reads on after a 400
// until the gateway closes the connection.
func (s *suite) exchangeWait(t *testing.T, raw string, waitClose bool) answer {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A safety net against a hung gateway, not a measurement.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	var rec strings.Builder
	br := bufio.NewReader(io.TeeReader(c, &rec))
	method, _, _ := strings.Cut(raw, " ")
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	for err == nil && res.StatusCode >= 100 && res.StatusCode < 200 && res.StatusCode != 101 {
		res, err = http.ReadResponse(br, &http.Request{Method: method})
	}
	if err != nil {
		t.Fatalf("read response: %v (got %q)", err, rec.String())
	}
	b, _ := io.ReadAll(res.Body)
	a := answer{res: res, body: string(b)}
	if waitClose && res.StatusCode == http.StatusBadRequest {
		// After a refusal the gateway closes at once; this bound only
		// keeps one that does not from stalling the run.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, br)
		a.closed = err == nil || errors.Is(err, syscall.ECONNRESET)
	}
	a.raw = rec.String()
	return a
}

func (s *suite) reached() int { return len(s.home.all()) + len(s.app.all()) }

// noLeak fails when the relay token is anywhere in what the gateway wrote.
func noLeak(t *testing.T, a answer) {
	t.Helper()
	if strings.Contains(a.raw, relay) {
		t.Errorf("the relay token reached the caller:\n%s", a.raw)
	}
}

func TestAttackHeaders(t *testing.T) {
	s := start(t)
	cases := []struct {
		name  string
		extra string // raw header lines
	}{
		{"connection header names gateway headers", "Connection: keep-alive, X-Wakegate-Relay, X-Forwarded-For, X-Real-Ip\r\n"},
		{"relay header, upper case", "X-WAKEGATE-RELAY: forged\r\n"},
		{"relay header, lower case", "x-wakegate-relay: forged\r\n"},
		{"relay header, underscore", "X_Wakegate_Relay: forged\r\n"},
		{"relay header, twice", "X-Wakegate-Relay: forged\r\nX-Wakegate-Relay: forged2\r\n"},
		{"probe header, every case", "X-Wakegate-Probe: forged\r\nx-wakegate-probe: forged\r\n"},
		{"probe header, underscore", "X_WAKEGATE_PROBE: forged\r\n"},
		{"identity headers", "X-Real-Ip: forged\r\nTrue-Client-Ip: forged\r\nCF-Connecting-IP: forged\r\nFly-Client-Ip: forged\r\n" +
			"X-Client-Ip: forged\r\nX-Original-Forwarded-For: forged\r\nForwarded: for=forged\r\nX-Forwarded-Host: forged\r\n"},
		{"identity headers, underscore", "X_Real_IP: forged\r\nX_Forwarded_For: forged\r\nX_Forwarded_Host: forged\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := len(s.home.all())
			a := s.exchange(t, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n"+c.extra+"\r\n")
			if a.res.StatusCode != 200 || len(s.home.all()) != n+1 {
				t.Fatalf("status %d (%s)", a.res.StatusCode, a.body)
			}
			got := s.home.all()[n].Header
			for k, vs := range got {
				for _, v := range vs {
					if strings.Contains(v, "forged") {
						t.Errorf("%s: %q reached the home", k, v)
					}
				}
			}
			if v := got.Values("X-Wakegate-Relay"); len(v) != 1 || v[0] != relay {
				t.Errorf("relay header at the home %q; want the gateway's token once", v)
			}
			if got.Get("X-Forwarded-For") != "127.0.0.1" || got.Get("X-Real-Ip") != "127.0.0.1" {
				t.Errorf("forwarding headers at the home: %v", got)
			}
		})
	}
}

func TestAttackRelayTokenNeverReturned(t *testing.T) {
	s := start(t)
	for _, c := range []struct{ name, raw string }{
		{"headers, body, 103, trailers, cookie", "GET /node/h/reflect HTTP/1.1\r\nHost: gw\r\nTE: trailers\r\n\r\n"},
		{"upstream error page", "GET /node/h/fail HTTP/1.1\r\nHost: gw\r\n\r\n"},
		{"upgrade answered without 101", "GET /node/h/ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"},
		{"gateway error page", "GET /node/h/%00 HTTP/1.1\r\nHost: gw\r\nAccept: text/html\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := s.exchange(t, c.raw)
			noLeak(t, a)
			if c.name == "upgrade answered without 101" && a.res.StatusCode != http.StatusForbidden {
				t.Errorf("status %d; want the home's 403 passed on", a.res.StatusCode)
			}
		})
	}
}

func TestAttackFraming(t *testing.T) {
	s := start(t)
	cases := []struct {
		name string
		raw  string
		want int // 400 means any 4xx
	}{
		{"CL and TE", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"duplicate Content-Length", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
		{"Content-Length list", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5, 5\r\n\r\nhello", 400},
		{"TE not chunked", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"folded first header line", "GET /node/h/x HTTP/1.1\r\n Host: gw\r\n\r\n", 400},
		{"NUL in a value", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nX-A: a\x00b\r\n\r\n", 400},
		{"CR in a value", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nX-A: a\rb\r\n\r\n", 400},
		{"space before colon", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nX-A : a\r\n\r\n", 400},
		// Body framing errors come last: the headers are streamed to the
		// upstream before the body fails, so the upstream sees the request
		// start (and a broken body); the caller gets 400, not 502.
		{"bare LF chunk size", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400},
		{"bad chunk size", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400},
	}
	// The home is woken first: a broken body must not drop its verdict.
	if a := s.exchange(t, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n\r\n"); a.res.StatusCode != 200 {
		t.Fatalf("wake: %d", a.res.StatusCode)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := s.reached()
			a := s.exchangeWait(t, c.raw, true)
			if st := a.res.StatusCode; st != c.want && (c.want != 400 || st < 400 || st >= 500) {
				t.Errorf("status %d; want %d", a.res.StatusCode, c.want)
			}
			bodyLevel := strings.HasSuffix(c.name, "chunk size")
			if s.reached() != n && !bodyLevel {
				t.Errorf("the request reached an upstream")
			}
			if bodyLevel && !s.g.Engine().Warm("h1") {
				t.Errorf("a caller's broken body dropped the home's warm verdict")
			}
			if a.res.StatusCode == 400 && !a.closed {
				t.Errorf("the connection stayed open after a framing refusal")
			}
		})
	}
}

// TestAttackObsFold sends header values continued on a folded line. RFC
// 9112 (5.2) lets a server refuse them or replace each fold with spaces
// before it interprets or forwards the field; the gateway does the latter
// (net/http unfolds while it parses), so the home sees one value with no
// line break, and a fold cannot start a header of its own.
func TestAttackObsFold(t *testing.T) {
	s := start(t)
	for _, c := range []struct {
		name, lines, field, want string
	}{
		{"plain fold", "X-A: a\r\n folded\r\n", "X-A", "a folded"},
		{"tab fold", "X-A: a\r\n\tfolded\r\n", "X-A", "a folded"},
		{"fold that looks like the relay header", "X-A: a\r\n X-Wakegate-Relay: forged\r\n", "X-Wakegate-Relay", relay},
		{"fold that looks like a forwarding header", "X-A: a\r\n X-Forwarded-For: 1.2.3.4\r\n", "X-Forwarded-For", "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(s.home.all())
			a := s.exchange(t, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n"+c.lines+"\r\n")
			if a.res.StatusCode != 200 || len(s.home.all()) != n+1 {
				t.Fatalf("status %d (%s)", a.res.StatusCode, a.body)
			}
			got := s.home.all()[n].Header
			if vs := got.Values(c.field); len(vs) != 1 || vs[0] != c.want {
				t.Errorf("%s at the home = %q; want exactly %q", c.field, vs, c.want)
			}
			for k, vs := range got {
				for _, v := range vs {
					if strings.ContainsAny(v, "\r\n") {
						t.Errorf("%s reached the home with a line break: %q", k, v)
					}
				}
			}
		})
	}
}

// traversalSeeds are encodings of dot segments, separators and look-alikes.
var traversalSeeds = []string{"..", ".", "%2e%2e", "%2E%2e", ".%2e", "%2e.", "%2f", "%2F", "%5c", "\\", "%252e", "%25%32%65",
	"%c0%ae", "%ef%bc%8e", "%ef%bc%8f", "..;", "%2e%2e%3b", ";", "%00", "%0a", "%u002e", "//", "/", "node", "apps", "a", "h",
	"%3f", "?", "#", "%23", "~", "%7e", "\u2025", "%e2%80%a5", "\u00a0", "%20"}

// TestAttackTraversal sends fixed and generated traversal paths: each one
// either reaches the route its canonical form names with that exact path,
// is redirected (308, with a local Location), or is refused with 4xx.
func TestAttackTraversal(t *testing.T) {
	s := start(t)
	paths := []string{"/node/h/ok", "/apps/a/ok", "/node/h/%3F", "/apps/a/../../node/h/whoami", "/apps/a/%2e%2e/%2e%2e/node/h/x", "/node/h/..%2f..%2fapps/a/",
		"/apps/a/..\\..\\node\\h", "/apps/a/%2e%2e%5c%2e%2e%5cnode/h", "//evil.example/%2e%2e/node/h/"}
	rng := rand.New(rand.NewPCG(11, 12))
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(7) {
			b.WriteString("/" + traversalSeeds[rng.IntN(len(traversalSeeds))])
		}
		paths = append(paths, b.String())
	}
	counts := map[string]int{}
	for _, p := range paths {
		if strings.ContainsAny(p, " \x00\n#?") || strings.Contains(p, "\u00a0") || strings.Contains(p, "\u2025") {
			continue // not a valid request line; net/http refuses it before the gateway
		}
		hs, as := len(s.home.all()), len(s.app.all())
		a := s.exchange(t, "GET "+p+" HTTP/1.1\r\nHost: gw\r\n\r\n")
		noLeak(t, a)
		st := a.res.StatusCode
		switch {
		case st == 200:
			counts["routed"]++
			var got seen
			switch {
			case len(s.home.all()) == hs+1:
				got = s.home.all()[hs]
				if !strings.HasPrefix(p, "/node/h/") {
					t.Errorf("%s reached the home", p)
				}
			case len(s.app.all()) == as+1:
				got = s.app.all()[as]
				if !strings.HasPrefix(p, "/apps/a/") {
					t.Errorf("%s reached the app", p)
				}
			default:
				t.Errorf("%s: 200 without reaching an upstream", p)
				continue
			}
			if got.URI != p {
				t.Errorf("%s: the upstream received %s; a 200 must be for the canonical path as sent", p, got.URI)
			}
		case st == 308:
			counts["redirected"]++
			loc := a.res.Header.Get("Location")
			u, err := url.Parse(loc)
			if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
				t.Errorf("%s: redirect to %q: not a local path", p, loc)
			}
			if len(s.home.all()) != hs || len(s.app.all()) != as {
				t.Errorf("%s: redirected and forwarded", p)
			}
		case st >= 400 && st < 500:
			counts["refused"]++
			if len(s.home.all()) != hs || len(s.app.all()) != as {
				t.Errorf("%s: refused (%d) and forwarded", p, st)
			}
		default:
			t.Errorf("%s: status %d", p, st)
		}
	}
	t.Logf("traversal: %v", counts)
}

func TestAttackRoutesAndHosts(t *testing.T) {
	s := start(t)
	cases := []struct {
		name string
		raw  string
		want int
	}{
		{"unknown target", "GET /node/nobody/x HTTP/1.1\r\nHost: gw\r\n\r\n", 404},
		{"target with a dot", "GET /node/h.x/ HTTP/1.1\r\nHost: gw\r\n\r\n", 404},
		{"target too long", "GET /node/" + strings.Repeat("h", 300) + "/ HTTP/1.1\r\nHost: gw\r\n\r\n", 404},
		{"unknown slug", "GET /apps/zz/x HTTP/1.1\r\nHost: gw\r\n\r\n", 404},
		{"encoded slug", "GET /apps/%61/x HTTP/1.1\r\nHost: gw\r\n\r\n", 308},
		{"absolute-form URI for another host", "GET http://evil.example/node/h/x HTTP/1.1\r\nHost: gw\r\n\r\n", 200},
		{"missing Host", "GET /node/h/x HTTP/1.1\r\n\r\n", 400},
		{"Host with userinfo", "GET /node/h/x HTTP/1.1\r\nHost: user@gw\r\n\r\n", 400},
		{"two Host headers", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nHost: evil\r\n\r\n", 400},
		{"open redirect through the 308", "GET //evil.example/../x HTTP/1.1\r\nHost: gw\r\n\r\n", 308},
		{"open redirect through the slash redirect", "GET /apps/a HTTP/1.1\r\nHost: evil.example\r\n\r\n", 308},
		{"h2c upgrade", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", 200},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 405},
		{"cross-site WebSocket", "GET /node/h/socket HTTP/1.1\r\nHost: gw\r\nOrigin: https://evil.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", 403},
		{"oversized headers", "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nX-Big: " + strings.Repeat("b", 8<<10) + "\r\n\r\n", 431},
		{"oversized body", "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 4096\r\n\r\n" + strings.Repeat("b", 4096), 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := s.exchange(t, c.raw)
			noLeak(t, a)
			if a.res.StatusCode != c.want {
				t.Fatalf("status %d; want %d (%s)", a.res.StatusCode, c.want, a.body)
			}
			if loc := a.res.Header.Get("Location"); loc != "" && (!strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//")) {
				t.Errorf("Location %q leaves the gateway", loc)
			}
			if c.name == "h2c upgrade" && a.res.StatusCode == http.StatusSwitchingProtocols {
				t.Errorf("h2c upgrade accepted")
			}
		})
	}
}

// A slowloris client (headers that never end) and a client that never
// sends its body are cut by the server's deadlines, while a legitimate
// client is served throughout.
func TestAttackSlowClients(t *testing.T) {
	s := start(t)
	var slow []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nX-Slow: ")
		slow = append(slow, c)
	}
	var worst time.Duration
	for range 20 {
		t0 := time.Now()
		a := s.exchange(t, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n\r\n")
		if a.res.StatusCode != 200 {
			t.Fatalf("legitimate client: %d", a.res.StatusCode)
		}
		worst = max(worst, time.Since(t0))
	}
	t.Logf("legitimate client beside 20 slowloris connections: worst latency %s", worst)
	for i, c := range slow {
		// read_header_timeout is 1s: the gateway closes; this bound only
		// keeps a broken gateway from hanging the run.
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("slowloris connection %d still open", i)
		}
	}
}

// A wake storm: 10,000 requests over 1,000 sleeping homes, 100 at a time.
// Every request is answered (200, or 503/429 from a limit), each home is
// woken once at most, and once the gateway is closed the goroutines return
// to their count before it started: nothing the storm started outlives it.
func TestAttackWakeStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("storm")
	}
	const homes, requests, parallel = 1000, 10000, 100
	up := newUpstream(t)
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:0\"\ndata_dir: %q\nlog: {access: false}\nwake: {warm_ttl: 1h, idle_timeout: 0s}\nhomes:\n",
		filepath.Join(t.TempDir(), "data"))
	for i := range homes {
		fmt.Fprintf(&b, "  - {id: s%d, target: t%d, provider: static, endpoint: %q, probe: tcp}\n", i, i, up.URL)
	}
	cfg, err := all.Load("storm.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	closeGW := sync.OnceFunc(g.Close)
	defer closeGW()
	front := httptest.NewServer(g.Handler())
	defer front.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: parallel}
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}

	var mu sync.Mutex
	statuses := map[int]int{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				res, err := client.Get(fmt.Sprintf("%s/node/t%d/x", front.URL, i%homes))
				st := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					_ = res.Body.Close()
					st = res.StatusCode
				}
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			}
		}()
	}
	for i := range requests {
		work <- i
	}
	close(work)
	wg.Wait()
	tr.CloseIdleConnections()
	t.Logf("statuses %v", statuses)
	for st, n := range statuses {
		if st != 200 && st != 503 && st != 429 {
			t.Errorf("%d requests answered %d", n, st)
		}
	}
	n := len(logs.Lines("wake"))
	if n > homes {
		t.Errorf("%d wakes for %d homes; want at most one each", n, homes)
	}
	t.Logf("wakes: %d for %d homes", n, homes)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use after the storm: %d KiB; goroutines before %d", ms.HeapInuse>>10, before)
	front.Close()
	closeGW()
	up.CloseClientConnections()
	testbin.Eventually(t, "goroutines back to their count before the gateway started", func() bool {
		return runtime.NumGoroutine() <= before+2
	})
}
