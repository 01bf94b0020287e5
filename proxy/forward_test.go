package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/testbin"
)

const testToken = "relay-T0KEN-9f8e7d"

// seen is one request as an upstream received it.
type seen struct {
	Method, URI, Path, Host string
	Header                  http.Header
	Body                    []byte
}

// upstream is a real loopback HTTP server that records what reaches it and
// counts the connections it accepts.
type upstream struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	reqs  []seen
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// newUpstream starts an upstream whose handler is h after recording the
// request (h may be nil: 200 "ok").
func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, Host: r.Host, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	u.Listener = countingListener{Listener: u.Listener, n: &u.conns}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) seen() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func (u *upstream) last(t *testing.T) seen {
	t.Helper()
	s := u.seen()
	if len(s) == 0 {
		t.Fatal("the upstream received no request")
	}
	return s[len(s)-1]
}

func (u *upstream) url(t *testing.T, path string) *url.URL {
	t.Helper()
	v, err := url.Parse(u.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deadURL is a loopback address where nothing listens.
func deadURL(t *testing.T) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &url.URL{Scheme: "http", Host: addr}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions() Options {
	return Options{
		RelayHeader:           "X-Wakegate-Relay",
		StripHeaders:          []string{"X-Wakegate-Probe"},
		DialTimeout:           2 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       time.Minute,
		Log:                   quietLog(),
	}
}

// front serves p on a loopback server; route builds each request's route.
func front(t *testing.T, o Options, route func() *forward.Route) (*httptest.Server, *Proxy) {
	t.Helper()
	return frontFor(t, o, route, "")
}

// frontFor is front answering only requests for host (any when ""): a
// test package running beside this one may still dial a loopback port
// this server now holds (a home's port it chose before its process bound
// it), and such a stranger's request must not reach an upstream whose
// requests a test counts.
func frontFor(t *testing.T, o Options, route func() *forward.Route, host string) (*httptest.Server, *Proxy) {
	t.Helper()
	p := New(o)
	t.Cleanup(p.Close)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host != "" && r.Host != host {
			http.Error(w, "not this test's request", http.StatusMisdirectedRequest)
			return
		}
		p.Serve(w, r, route())
	}))
	t.Cleanup(s.Close)
	return s, p
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func newReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestForwardPathAndHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route {
		return &forward.Route{Kind: "app", Name: "a", HomeID: "h1", Upstream: up.url(t, "/base/"), StripPrefix: "/apps/a",
			RelayToken: testToken, Waited: 1500 * time.Millisecond}
	})
	req := newReq(t, http.MethodGet, s.URL+"/apps/a/x/y%3Fz?q=1&r=%20", nil)
	req.Header.Set("X-Wakegate-Relay", "client-forged")
	req.Header.Set("X-Wakegate-Probe", "client-forged")
	req.Header.Set("X-Request-Id", "rid-1")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("User-Agent", "")
	res, body := do(t, req)
	if res.StatusCode != 200 || body != "ok" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	got := up.last(t)
	checks := []struct{ what, got, want string }{
		{"request URI", got.URI, "/base/x/y%3Fz?q=1&r=%20"},
		{"host (the client's)", got.Host, strings.TrimPrefix(s.URL, "http://")},
		{"relay header", strings.Join(got.Header.Values("X-Wakegate-Relay"), ","), testToken},
		{"probe header", strings.Join(got.Header.Values("X-Wakegate-Probe"), ","), ""},
		{"X-Forwarded-For (untrusted peer)", got.Header.Get("X-Forwarded-For"), "127.0.0.1"},
		{"X-Forwarded-Host", got.Header.Get("X-Forwarded-Host"), strings.TrimPrefix(s.URL, "http://")},
		{"X-Forwarded-Proto", got.Header.Get("X-Forwarded-Proto"), "http"},
		{"X-Request-Id", got.Header.Get("X-Request-Id"), "rid-1"},
		{"User-Agent", got.Header.Get("User-Agent"), ""},
		{"Server-Timing", res.Header.Get("Server-Timing"), "wake;dur=1500"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q; want %q", c.what, c.got, c.want)
		}
	}
}

func TestForwardUpstreamRootAndNoStrip(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route { return &forward.Route{Name: "a", Upstream: up.url(t, "")} })
	res, _ := do(t, newReq(t, http.MethodGet, s.URL+"/apps/a/", nil))
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got := up.last(t); got.URI != "/apps/a/" || got.Header.Get("X-Wakegate-Relay") != "" {
		t.Fatalf("upstream saw %q with relay %q; want the full path and no relay header", got.URI, got.Header.Get("X-Wakegate-Relay"))
	}
	res, _ = do(t, newReq(t, http.MethodGet, s.URL+"/", nil))
	if got := up.last(t); res.StatusCode != 200 || got.URI != "/" {
		t.Fatalf("upstream saw %q", got.URI)
	}
}

func TestForwardStripPrefixToRoot(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), StripPrefix: "/apps/a"}
	})
	for path, want := range map[string]string{"/apps/a": "/", "/apps/a/": "/", "/apps/a/b%2Fc": "/b%2Fc"} {
		do(t, newReq(t, http.MethodGet, s.URL+path, nil))
		if got := up.last(t).URI; got != want {
			t.Errorf("%s reached the upstream as %q; want %q", path, got, want)
		}
	}
}

// rawExchange sends a raw HTTP/1.1 request to addr and returns the response.
func rawExchange(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(strings.NewReader(string(b)))
	return res
}

func TestForwardConnectionHeaderCannotDropGatewayHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	s, _ := front(t, testOptions(), func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), RelayToken: testToken}
	})
	res := rawExchange(t, s.Listener.Addr().String(), "GET /x HTTP/1.1\r\nHost: gw.example\r\n"+
		"Connection: keep-alive, Authorization, X-Forwarded-For, X-Wakegate-Relay, X-Request-Id, X-Forwarded-Proto\r\n"+
		"Authorization: Bearer user-secret\r\nX-Forwarded-For: 198.51.100.1\r\nX-Request-Id: rid-7\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := up.last(t)
	if v := got.Header.Values("X-Wakegate-Relay"); len(v) != 1 || v[0] != testToken {
		t.Errorf("relay header = %q; want the token", v)
	}
	if v := got.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q; want 127.0.0.1", v)
	}
	if v := got.Header.Get("X-Forwarded-Proto"); v != "http" {
		t.Errorf("X-Forwarded-Proto = %q; want http", v)
	}
	if v := got.Header.Get("X-Request-Id"); v != "rid-7" {
		t.Errorf("X-Request-Id = %q; want rid-7", v)
	}
	if v := got.Header.Get("Authorization"); v != "" {
		t.Errorf("Authorization named in Connection still reached the upstream: %q", v)
	}
	if v := got.Header.Get("Connection"); v != "" {
		t.Errorf("Connection header forwarded: %q", v)
	}
}

func TestForwardTrustedProxies(t *testing.T) {
	up := newUpstream(t, nil)
	route := func() *forward.Route { return &forward.Route{Name: "a", Upstream: up.url(t, "")} }
	trusted := testOptions()
	trusted.Trusted = func(ip net.IP) bool { return ip.IsLoopback() }
	ts, _ := front(t, trusted, route)
	us, _ := front(t, testOptions(), route)

	send := func(s *httptest.Server) seen {
		req := newReq(t, http.MethodGet, s.URL+"/", nil)
		req.Header.Add("X-Forwarded-For", "203.0.113.9")
		req.Header.Add("X-Forwarded-For", "10.0.0.2")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Host", "public.example")
		do(t, req)
		return up.last(t)
	}
	got := send(ts)
	if v := got.Header.Get("X-Forwarded-For"); v != "203.0.113.9, 10.0.0.2, 127.0.0.1" {
		t.Errorf("trusted: X-Forwarded-For = %q; want the chain extended with 127.0.0.1", v)
	}
	if got.Header.Get("X-Forwarded-Proto") != "https" || got.Header.Get("X-Forwarded-Host") != "public.example" {
		t.Errorf("trusted: proto, host = %q, %q; want the proxy's", got.Header.Get("X-Forwarded-Proto"), got.Header.Get("X-Forwarded-Host"))
	}
	got = send(us)
	if v := got.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("untrusted: X-Forwarded-For = %q; want 127.0.0.1 only", v)
	}
	if got.Header.Get("X-Forwarded-Proto") != "http" || got.Header.Get("X-Forwarded-Host") != strings.TrimPrefix(us.URL, "http://") {
		t.Errorf("untrusted: proto, host = %q, %q; want the gateway's own", got.Header.Get("X-Forwarded-Proto"), got.Header.Get("X-Forwarded-Host"))
	}
}

func TestForwardMasksRelayTokenInResponses(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Wakegate-Relay", testToken)
		w.Header().Set("X-Echo", "token="+r.Header.Get("X-Wakegate-Relay"))
		if r.URL.Query().Get("chunked") != "" {
			f := w.(http.Flusher)
			for _, part := range []string{big, testToken[:5], testToken[5:], big, testToken} {
				_, _ = io.WriteString(w, part)
				f.Flush()
			}
			return
		}
		body := "a" + testToken + big + testToken
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = io.WriteString(w, body)
	})
	s, _ := front(t, testOptions(), func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), RelayToken: testToken}
	})
	stars := strings.Repeat("*", len(testToken))
	for _, q := range []string{"", "?chunked=1"} {
		res, body := do(t, newReq(t, http.MethodGet, s.URL+"/"+q, nil))
		if strings.Contains(body, testToken) {
			t.Errorf("%s: the token leaked in the body", q)
		}
		if res.Header.Get("X-Wakegate-Relay") != "" {
			t.Errorf("%s: the relay header came back to the client", q)
		}
		if v := res.Header.Get("X-Echo"); v != "token="+stars {
			t.Errorf("%s: X-Echo = %q; want the token masked", q, v)
		}
		want := "a" + stars + big + stars
		if q != "" {
			want = big + stars + big + stars
		}
		if body != want {
			t.Errorf("%s: body of %d bytes differs from the masked upstream body of %d", q, len(body), len(want))
		}
		if q == "" && res.ContentLength != int64(len(want)) {
			t.Errorf("Content-Length = %d; want %d", res.ContentLength, len(want))
		}
	}
}

func TestForwardOriginChecks(t *testing.T) {
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		mt, msg, err := c.ReadMessage()
		if err == nil {
			_ = c.WriteMessage(mt, append([]byte("echo:"), msg...))
		}
	})
	route := func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), RelayToken: testToken}
	}
	def, _ := front(t, testOptions(), route)
	custom := testOptions()
	custom.AllowOrigin = func(origin string, r *http.Request) bool {
		return origin == "https://app.example" || SameHostOrigin(origin, r)
	}
	cus, _ := front(t, custom, route)

	cases := []struct {
		name   string
		s      *httptest.Server
		origin string
		ok     bool
	}{
		{"no origin", def, "", true},
		{"same host", def, "http://" + def.Listener.Addr().String(), true},
		{"cross site", def, "https://evil.example", false},
		{"same host other port", def, "http://127.0.0.1:1", false},
		{"null", def, "null", false},
		{"allowed by option", cus, "https://app.example", true},
		{"refused by option", cus, "https://evil.example", false},
	}
	for _, c := range cases {
		before := up.conns.Load()
		h := http.Header{}
		if c.origin != "" {
			h.Set("Origin", c.origin)
		}
		conn, res, err := websocket.DefaultDialer.Dial("ws://"+c.s.Listener.Addr().String()+"/ws", h)
		if !c.ok {
			if err == nil {
				conn.Close()
				t.Errorf("%s: upgrade accepted", c.name)
				continue
			}
			if res == nil || res.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %v; want 403", c.name, err)
			}
			if n := up.conns.Load() - before; n != 0 {
				t.Errorf("%s: the upstream was dialled %d times", c.name, n)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err := conn.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		_, msg, err := conn.ReadMessage()
		conn.Close()
		if err != nil || string(msg) != "echo:hi" {
			t.Errorf("%s: echo = %q, %v", c.name, msg, err)
		}
		if v := up.last(t).Header.Get("X-Wakegate-Relay"); v != testToken {
			t.Errorf("%s: upgrade reached the upstream with relay %q", c.name, v)
		}
	}
}

func TestForwardBodyLimit(t *testing.T) {
	const limit = 1000
	up := newUpstream(t, nil)
	var logs testbin.SyncBuffer
	o := testOptions()
	o.MaxBodyBytes = limit
	o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	s, _ := front(t, o, func() *forward.Route { return &forward.Route{Name: "a", Upstream: up.url(t, "")} })

	// Declared too large: refused before any dial.
	res, body := do(t, newReq(t, http.MethodPost, s.URL+"/", strings.NewReader(strings.Repeat("a", limit+1))))
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "body_too_large") {
		t.Fatalf("declared oversize body: %d %s; want 413", res.StatusCode, body)
	}
	if n := up.conns.Load(); n != 0 {
		t.Fatalf("the upstream was dialled %d times for a refused body", n)
	}
	if !strings.Contains(logs.String(), "server.max_body_bytes") {
		t.Errorf("the log of a refused body does not name the limit's setting:\n%s", logs.String())
	}
	// At the limit: forwarded whole.
	res, _ = do(t, newReq(t, http.MethodPost, s.URL+"/", strings.NewReader(strings.Repeat("b", limit))))
	if res.StatusCode != 200 || len(up.last(t).Body) != limit {
		t.Fatalf("body at the limit: %d, upstream got %d bytes", res.StatusCode, len(up.last(t).Body))
	}
	// Chunked past the limit: 413, and the upstream never holds more than
	// the limit.
	req := newReq(t, http.MethodPost, s.URL+"/", io.MultiReader(strings.NewReader(strings.Repeat("c", 3*limit))))
	req.ContentLength = -1
	res, _ = do(t, req)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked oversize body: status %d; want 413", res.StatusCode)
	}
	if n := strings.Count(logs.String(), "server.max_body_bytes"); n != 2 {
		t.Errorf("the log names the limit's setting %d times after two refused bodies; want 2:\n%s", n, logs.String())
	}
	up.Close() // waits for the upstream's handlers
	for _, r := range up.seen() {
		if len(r.Body) > limit {
			t.Fatalf("the upstream received %d body bytes; limit %d", len(r.Body), limit)
		}
	}
}

func TestForwardDeadUpstream(t *testing.T) {
	dead := deadURL(t)
	var logs testbin.SyncBuffer
	o := testOptions()
	o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: dead, RelayToken: testToken}
	})
	req := newReq(t, http.MethodGet, s.URL+"/x", nil)
	req.Header.Set("Accept", "application/json")
	res, body := do(t, req)
	if res.StatusCode != http.StatusBadGateway || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON caller: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "upstream_unreachable" {
		t.Fatalf("JSON body %s: %v", body, err)
	}
	if strings.Contains(body, testToken) {
		t.Fatal("the error body contains the relay token")
	}
	req = newReq(t, http.MethodGet, s.URL+"/x", nil)
	req.Header.Set("Accept", "text/html")
	res, body = do(t, req)
	if res.StatusCode != http.StatusBadGateway || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html") {
		t.Fatalf("browser: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if strings.Contains(body, testToken) {
		t.Fatal("the error page contains the relay token")
	}
	// The operator's log has the cause and the likely fix; the caller has
	// neither.
	if l := logs.String(); !strings.Contains(l, "connection refused") || !strings.Contains(l, "hint=\"nothing accepts connections") {
		t.Fatalf("the log lacks the cause or the hint:\n%s", l)
	}
	if strings.Contains(body, "nothing accepts") || strings.Contains(body, dead.Host) {
		t.Fatalf("the public page carries operator detail:\n%s", body)
	}
}

func TestForwardResponseHeaderTimeout(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; ends when the proxy gives up
	})
	o := testOptions()
	o.ResponseHeaderTimeout = 200 * time.Millisecond
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), RelayToken: testToken}
	})
	res, body := do(t, newReq(t, http.MethodGet, s.URL+"/slow", nil))
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, "upstream_timeout") {
		t.Fatalf("got %d %s; want 504 upstream_timeout", res.StatusCode, body)
	}
	if strings.Contains(body, testToken) {
		t.Fatal("the error body contains the relay token")
	}
}

func TestForwardRetriesUnreachedReplayableRequests(t *testing.T) {
	up := newUpstream(t, nil)
	dead := deadURL(t)
	var retries atomic.Int64
	o := testOptions()
	o.Host.Default = HostUpstream // the retry's Host is the fresh upstream's
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: dead, Retry: func(ctx context.Context) (*url.URL, error) {
			retries.Add(1)
			return up.url(t, ""), nil
		}}
	})
	res, body := do(t, newReq(t, http.MethodGet, s.URL+"/again", nil))
	if res.StatusCode != 200 || body != "ok" || retries.Load() != 1 {
		t.Fatalf("GET: %d %q after %d retries; want 200 ok after 1", res.StatusCode, body, retries.Load())
	}
	if got := up.last(t); got.URI != "/again" || got.Host != up.Listener.Addr().String() {
		t.Fatalf("retried request reached the upstream as %q for host %q", got.URI, got.Host)
	}
	// A streamed body cannot be replayed: no retry, 502.
	req := newReq(t, http.MethodPost, s.URL+"/post", io.MultiReader(strings.NewReader("payload")))
	req.ContentLength = -1
	res, _ = do(t, req)
	if res.StatusCode != http.StatusBadGateway || retries.Load() != 1 {
		t.Fatalf("POST: %d after %d retries; want 502 and no new retry", res.StatusCode, retries.Load())
	}
	if n := len(up.seen()); n != 1 {
		t.Fatalf("the upstream saw %d requests; want only the GET", n)
	}
}

func TestForwardRetryErrorIsAnswered(t *testing.T) {
	s, _ := front(t, testOptions(), func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: deadURL(t), Retry: func(context.Context) (*url.URL, error) {
			return nil, fmt.Errorf("wake: %w", fault.New(fault.NotReady, "home_waking", "Still waking.").WithRetry(3*time.Second))
		}}
	})
	res, body := do(t, newReq(t, http.MethodGet, s.URL+"/", nil))
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "3" || !strings.Contains(body, "home_waking") {
		t.Fatalf("got %d Retry-After %q %s; want 503, 3, home_waking", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
}

func TestSameHostOrigin(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://gw.example:8080/", nil)
	for origin, want := range map[string]bool{
		"http://gw.example:8080":  true,
		"https://GW.example:8080": true,
		"http://gw.example":       false,
		"http://gw.example:8081":  false,
		"http://evil.example":     false,
		"null":                    false,
		"":                        false,
		"gw.example:8080":         false,
	} {
		if got := SameHostOrigin(origin, r); got != want {
			t.Errorf("SameHostOrigin(%q) = %v; want %v", origin, got, want)
		}
	}
}

// TestForwardFailureReported forwards to a dead upstream: every failed
// attempt is reported to the route's owner (who drops the warm verdict
// there), a streamed body that cannot be replayed included.
func TestForwardFailureReported(t *testing.T) {
	for _, c := range []struct {
		name   string
		method string
		body   string
		stream bool // a body with no length, which cannot be replayed
		retry  bool
		want   int32
	}{
		{"GET without a retry", http.MethodGet, "", false, false, 1},
		{"GET whose replay fails too", http.MethodGet, "", false, true, 2},
		{"streamed POST", http.MethodPost, "payload", true, true, 1},
		{"POST with a length", http.MethodPost, "payload", false, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var failures, retries atomic.Int32
			dead := deadURL(t)
			s, _ := front(t, testOptions(), func() *forward.Route {
				rt := &forward.Route{Name: "a", Upstream: dead, OnFailure: func() { failures.Add(1) }}
				if c.retry {
					rt.Retry = func(context.Context) (*url.URL, error) { retries.Add(1); return dead, nil }
				}
				return rt
			})
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
				if c.stream {
					body = io.MultiReader(body)
				}
			}
			req := newReq(t, c.method, s.URL+"/", body)
			if c.stream {
				req.ContentLength = -1
			}
			res, _ := do(t, req)
			if res.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d; want 502", res.StatusCode)
			}
			if got := failures.Load(); got != c.want {
				t.Fatalf("%d failures reported (after %d retries); want %d", got, retries.Load(), c.want)
			}
		})
	}
}

// TestHeaderDeadlineLeftOn: the response-head deadline an exchange leaves
// on a connection whose answer it read whole (upConn.headerDeadline)
// neither drops the connection once it has passed nor cuts what comes
// after: a connection idle past it is reused, a head slower than the
// timeout still gets 504, and a body slower than the timeout is not cut.
func TestHeaderDeadlineLeftOn(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow-head":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		case "/slow-body":
			w.Header().Set("Content-Length", "6")
			_, _ = io.WriteString(w, "abc")
			w.(http.Flusher).Flush()
			time.Sleep(600 * time.Millisecond)
			_, _ = io.WriteString(w, "def")
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	o := testOptions()
	o.ResponseHeaderTimeout = 200 * time.Millisecond
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Name: "a", Upstream: up.url(t, ""), RelayToken: testToken}
	})
	get := func(path string) (int, string) {
		t.Helper()
		res, body := do(t, newReq(t, http.MethodGet, s.URL+path, nil))
		return res.StatusCode, body
	}
	if code, body := get("/a"); code != 200 || body != "ok" {
		t.Fatalf("first: %d %q", code, body)
	}
	time.Sleep(600 * time.Millisecond) // past the deadline the answer left on
	if code, body := get("/b"); code != 200 || body != "ok" {
		t.Fatalf("after an idle past the deadline: %d %q", code, body)
	}
	if n := up.conns.Load(); n != 1 {
		t.Fatalf("the upstream saw %d connections; the idle one was not reused", n)
	}
	if code, body := get("/slow-body"); code != 200 || body != "abcdef" {
		t.Fatalf("a body slower than the head timeout: %d %q; want 200 abcdef", code, body)
	}
	if code, body := get("/c"); code != 200 || body != "ok" {
		t.Fatalf("after the slow body: %d %q", code, body)
	}
	if code, body := get("/slow-head"); code != http.StatusGatewayTimeout || !strings.Contains(body, "upstream_timeout") {
		t.Fatalf("a slow head after held answers: %d %s; want 504 upstream_timeout", code, body)
	}
}
