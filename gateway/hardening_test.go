package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// These tests speak raw HTTP/1.1 over net.Dial to a real gateway on a
// loopback port, so that nothing between the test and the gateway cleans,
// reframes or rejects what is sent. Upstreams are real loopback servers that
// record what reaches them.

const hardToken = "hard-relay-TOKEN-5e6f"

// hardSeen is one request as an upstream received it.
type hardSeen struct {
	URI, Path string
	Header    http.Header
	Body      []byte
}

// hardUpstream records requests and counts accepted connections. The
// gateway's own app observations (direct health checks and self-probes,
// told apart by their User-Agent) are answered 200 and neither recorded nor
// counted: they run on their own schedule, whatever a test sends.
type hardUpstream struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	reqs  []hardSeen
}

type hardCountingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l hardCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c = &hardCountedConn{Conn: c, n: l.n}
	}
	return c, err
}

// hardCountedConn adds itself to n when it is read from for anything but
// an app observation: the first read of a request that was not one.
type hardCountedConn struct {
	net.Conn
	n       *atomic.Int64
	counted atomic.Bool
}

func (c *hardCountedConn) count() {
	if c.counted.CompareAndSwap(false, true) {
		c.n.Add(1)
	}
}

type hardConnKey struct{}

// hardObserver reports whether r is one of the gateway's app observations.
func hardObserver(r *http.Request) bool { return strings.HasPrefix(r.UserAgent(), "wakegate-") }

func newHardUpstream(t *testing.T, h http.HandlerFunc) *hardUpstream {
	t.Helper()
	u := &hardUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hardObserver(r) {
			_, _ = io.WriteString(w, "ok")
			return
		}
		if c, ok := r.Context().Value(hardConnKey{}).(*hardCountedConn); ok {
			c.count()
		}
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, hardSeen{URI: r.RequestURI, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprintf(w, "ok %d", len(body))
	}))
	u.Listener = hardCountingListener{Listener: u.Listener, n: &u.conns}
	u.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, hardConnKey{}, c)
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *hardUpstream) seen() []hardSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]hardSeen(nil), u.reqs...)
}

func (u *hardUpstream) last(t *testing.T) hardSeen {
	t.Helper()
	s := u.seen()
	if len(s) == 0 {
		t.Fatal("the upstream received no request")
	}
	return s[len(s)-1]
}

// hardGateway loads the YAML body (everything but listen and data_dir),
// builds the gateway with New and serves it on a loopback port until the
// test ends. It returns the gateway's address.
func hardGateway(t *testing.T, body string) string {
	t.Helper()
	_, addr := serveTestGateway(t, "hardening.yaml", body)
	return addr
}

// serveTestGateway loads the YAML body (everything but listen and
// data_dir) as the config file name, builds the gateway with New and
// serves it on a loopback port until the test ends. It returns the
// gateway and its address.
func serveTestGateway(t *testing.T, name, body string) (*Gateway, string) {
	t.Helper()
	text := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nlog:\n  access: false\n%s", filepath.Join(t.TempDir(), "data"), body)
	cfg, err := all.Load(name, []byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		g.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return g, ln.Addr().String()
}

// hardConn is a raw client connection.
type hardConn struct {
	net.Conn
	br *bufio.Reader
}

func hardDial(t *testing.T, addr string) *hardConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A safety net, not a measurement: a broken gateway fails the test
	// instead of hanging it.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &hardConn{Conn: c, br: bufio.NewReader(c)}
}

func (c *hardConn) send(t *testing.T, raw string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// response reads one response and its whole body.
func (c *hardConn) response(t *testing.T, method string) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return res, string(b)
}

// closed reports whether the gateway closed the connection: the next read
// ends in EOF or a reset (not in the safety-net deadline).
func (c *hardConn) closed(t *testing.T) bool {
	t.Helper()
	// A gateway that closes does so at once; this bound only keeps one
	// that does not from stalling the run.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c.br)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	t.Logf("connection still open: %v", err)
	return false
}

// exchange sends one raw request on a new connection and reads the answer.
func hardExchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c := hardDial(t, addr)
	c.send(t, raw)
	method, _, _ := strings.Cut(raw, " ")
	return c.response(t, method)
}

func appsConfig(extra string, ups map[string]*hardUpstream) string {
	var b strings.Builder
	b.WriteString(extra)
	b.WriteString("\napps:\n")
	for slug, u := range ups {
		fmt.Fprintf(&b, "  - slug: %s\n    upstream: %q\n    kind: api\n", slug, u.URL)
	}
	return b.String()
}

func TestHardeningReadHeaderTimeoutClosesStalledConnection(t *testing.T) {
	addr := hardGateway(t, "server:\n  read_header_timeout: 300ms\n")
	c := hardDial(t, addr)
	c.send(t, "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Half: ")
	if !c.closed(t) {
		t.Fatal("a client that stalls mid-header kept its connection")
	}
	// A client that sends its header in time is served on the same config.
	res, body := hardExchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
	if res.StatusCode != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", res.StatusCode, body)
	}
}

func TestHardeningHeaderSizeLimit(t *testing.T) {
	addr := hardGateway(t, "server:\n  max_header_bytes: 4KiB\n")
	res, _ := hardExchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Small: "+strings.Repeat("s", 2000)+"\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("header under the limit: %d", res.StatusCode)
	}
	// Go's server allows a little slack past MaxHeaderBytes; 64 KiB is far
	// past both.
	// Only the status is read: the gateway hangs up on the unread rest of
	// the header, which may reset the connection before its body is read.
	c := hardDial(t, addr)
	c.send(t, "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Big: "+strings.Repeat("b", 64<<10)+"\r\n\r\n")
	res, err := http.ReadResponse(c.br, &http.Request{Method: http.MethodGet})
	if err != nil {
		t.Fatalf("oversize header: %v", err)
	}
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversize header: %d; want 431", res.StatusCode)
	}
}

func TestHardeningBodyLimit(t *testing.T) {
	const limit = 1024
	a := newHardUpstream(t, nil)
	addr := hardGateway(t, appsConfig("server:\n  max_body_bytes: 1KiB\n", map[string]*hardUpstream{"a": a}))

	// Declared past the limit: 413 and the upstream is never dialled.
	res, body := hardExchange(t, addr, fmt.Sprintf("POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s",
		limit+1, strings.Repeat("x", limit+1)))
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, "body_too_large") {
		t.Fatalf("declared oversize body: %d %s; want 413", res.StatusCode, body)
	}
	if n := a.conns.Load(); n != 0 {
		t.Fatalf("the upstream was dialled %d times for a refused body", n)
	}

	// Exactly the limit passes.
	res, body = hardExchange(t, addr, fmt.Sprintf("POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s",
		limit, strings.Repeat("y", limit)))
	if res.StatusCode != 200 || body != fmt.Sprintf("ok %d", limit) {
		t.Fatalf("body at the limit: %d %q", res.StatusCode, body)
	}

	// Chunked past the limit: 413 or the stream cut, and the upstream never
	// holds more than the limit.
	c := hardDial(t, addr)
	var chunked strings.Builder
	chunked.WriteString("POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n")
	for range 6 {
		fmt.Fprintf(&chunked, "200\r\n%s\r\n", strings.Repeat("z", 0x200))
	}
	chunked.WriteString("0\r\n\r\n")
	_, _ = io.WriteString(c, chunked.String()) // the gateway may close before reading it all
	if res, err := http.ReadResponse(c.br, &http.Request{Method: http.MethodPost}); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked oversize body: %d; want 413 or a cut connection", res.StatusCode)
		}
	}
	a.Close() // waits for the upstream's handlers to finish
	for _, r := range a.seen() {
		if len(r.Body) > limit {
			t.Fatalf("the upstream received %d body bytes; the limit is %d", len(r.Body), limit)
		}
	}
}

func TestHardeningConflictingFraming(t *testing.T) {
	a := newHardUpstream(t, nil)
	b := newHardUpstream(t, nil)
	addr := hardGateway(t, appsConfig("", map[string]*hardUpstream{"a": a, "b": b}))
	cases := map[string]string{
		"CL then TE": "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"TE then CL": "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"odd case":   "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\ncOnTeNt-LeNgTh: 5\r\ntRANSFER-eNCODING: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"upper case": "POST /apps/a/x HTTP/1.1\r\nHOST: gw\r\nCONTENT-LENGTH: 5\r\nTRANSFER-ENCODING: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"smuggled request": "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
			"GET /apps/b/smuggled HTTP/1.1\r\nHost: gw\r\n\r\n",
		"zero length": "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	}
	for name, raw := range cases {
		c := hardDial(t, addr)
		c.send(t, raw)
		res, body := c.response(t, http.MethodPost)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "bad_framing") {
			t.Errorf("%s: %d %s; want 400 bad_framing", name, res.StatusCode, body)
		}
		if !c.closed(t) {
			t.Errorf("%s: the connection stayed open", name)
		}
	}
	if n := len(a.seen()) + len(b.seen()); n != 0 {
		t.Fatalf("upstreams received %d requests with conflicting framing", n)
	}
}

func TestHardeningNormalFramingKeepAlive(t *testing.T) {
	a := newHardUpstream(t, nil)
	addr := hardGateway(t, appsConfig("", map[string]*hardUpstream{"a": a}))
	reqs := []string{
		"POST /apps/a/cl HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello",
		"POST /apps/a/te HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n",
		"POST /apps/a/cl2 HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\nhi",
		"GET /apps/a/get HTTP/1.1\r\nHost: gw\r\n\r\n",
	}
	want := []string{"ok 5", "ok 7", "ok 2", "ok 0"}
	check := func(mode string, c *hardConn) {
		for i := range reqs {
			res, body := c.response(t, http.MethodPost)
			if res.StatusCode != 200 || body != want[i] {
				t.Fatalf("%s: request %d: %d %q; want 200 %q", mode, i, res.StatusCode, body, want[i])
			}
		}
	}
	// One after another on a keep-alive connection.
	c := hardDial(t, addr)
	for i, r := range reqs {
		c.send(t, r)
		res, body := c.response(t, http.MethodPost)
		if res.StatusCode != 200 || body != want[i] {
			t.Fatalf("keep-alive: request %d: %d %q; want 200 %q", i, res.StatusCode, body, want[i])
		}
	}
	// All at once, pipelined.
	c = hardDial(t, addr)
	c.send(t, strings.Join(reqs, ""))
	check("pipelined", c)
	got := map[string]string{}
	for _, s := range a.seen() {
		got[s.Path] = string(s.Body)
	}
	for path, body := range map[string]string{"/apps/a/cl": "hello", "/apps/a/te": "abcdefg", "/apps/a/cl2": "hi", "/apps/a/get": ""} {
		if got[path] != body {
			t.Errorf("upstream got %q at %s; want %q", got[path], path, body)
		}
	}
	if n := len(a.seen()); n != 2*len(reqs) {
		t.Errorf("upstream saw %d requests; want %d", n, 2*len(reqs))
	}
}

func TestHardeningEncodedTraversal(t *testing.T) {
	a := newHardUpstream(t, nil)
	b := newHardUpstream(t, nil)
	addr := hardGateway(t, appsConfig("", map[string]*hardUpstream{"a": a, "b": b}))
	const none = ""
	cases := []struct {
		target string // the request-target, sent as is
		status int
		reach  string // "a", "b" or none
		path   string // the path the reached upstream sees
	}{
		// Dot segments are never resolved silently: a 308 names the
		// canonical path and nothing is forwarded (DESIGN rule 21).
		{"/apps/a/../b/x", 308, none, ""},
		{"/apps/a/%2e%2e/b/x", 308, none, ""},
		{"/apps/a/%2E%2E/b/x", 308, none, ""},
		{"/apps/a/x/../../b/y", 308, none, ""},
		{"/apps//a/../b/x", 308, none, ""},
		{"/node/x/../../apps/b/", 308, none, ""},
		{"http://gw/apps/a/%2e%2e/b/x", 308, none, ""},
		{"/apps/a/./x", 308, none, ""},
		{"/apps/a/%2e/x", 308, none, ""},
		{"/apps/a/x", 200, "a", "/apps/a/x"},
		// Resolving to /apps/b without the slash redirects; nothing reaches b.
		{"/apps/a/.%2e/b", 308, none, ""},
		{"//apps/a/../b", 308, none, ""},
		// Encoded separators, backslashes, double encoding and the like: 400.
		{"/apps/a/%2E%2E%2Fb", 400, none, ""},
		{"/apps/a/..%2fb", 400, none, ""},
		{"/apps/a/..%2Fb/x", 400, none, ""},
		{"/apps/a/%2e%2e%2f%2e%2e%2fb", 400, none, ""},
		{"/apps/a/%252e%252e/b", 400, none, ""},
		{"/apps/a/%25%32%65%25%32%65/b", 400, none, ""},
		{`/apps/a\..\b`, 400, none, ""},
		{`/apps/a/..\b/x`, 400, none, ""},
		{"/apps/a/%5c..%5cb", 400, none, ""},
		{"/apps/a/%5C..%5Cb/x", 400, none, ""},
		{"/apps/a/..;/b/x", 400, none, ""},
		{"/apps/a/%2e%2e%3b/b/x", 400, none, ""},
		{"/apps/a/%c0%ae%c0%ae/b", 400, none, ""},
		{"/apps/a/%ef%bc%8e%ef%bc%8e/b", 400, none, ""},
		{"/apps/a/%ef%bc%8fb", 400, none, ""},
		{"/apps/a/%u002e%u002e/b", 400, none, ""}, // refused by net/http itself
		{"/apps/a/..%00/b", 400, none, ""},
		{"/apps/a/%2e%2e%00/b", 400, none, ""},
	}
	for _, c := range cases {
		na, nb := len(a.seen()), len(b.seen())
		res, body := hardExchange(t, addr, "GET "+c.target+" HTTP/1.1\r\nHost: gw\r\nAccept: application/json\r\n\r\n")
		if res.StatusCode != c.status {
			t.Errorf("%s: status %d; want %d (%s)", c.target, res.StatusCode, c.status, body)
		}
		if c.status == 400 && !strings.Contains(body, "bad_path") && !strings.Contains(c.target, "%u") {
			t.Errorf("%s: 400 without bad_path: %s", c.target, body)
		}
		da, db := len(a.seen())-na, len(b.seen())-nb
		switch c.reach {
		case "a":
			if da != 1 || db != 0 || a.last(t).Path != c.path {
				t.Errorf("%s: a got %d, b got %d; want a to get %s", c.target, da, db, c.path)
			}
		case "b":
			if da != 0 || db != 1 || b.last(t).Path != c.path {
				t.Errorf("%s: a got %d, b got %d; want b to get %s", c.target, da, db, c.path)
			}
		default:
			if da != 0 || db != 0 {
				t.Errorf("%s: a got %d, b got %d; want nothing forwarded", c.target, da, db)
			}
		}
	}
	// Whatever reached an upstream is under its own prefix and carries no
	// dot segment or separator in any encoding.
	for name, u := range map[string]*hardUpstream{"a": a, "b": b} {
		for _, s := range u.seen() {
			low := strings.ToLower(s.URI)
			if !strings.HasPrefix(s.Path, "/apps/"+name+"/") || !strings.HasPrefix(s.URI, "/apps/"+name+"/") ||
				strings.Contains(s.Path, "..") || strings.Contains(low, "%2e") || strings.Contains(low, "%2f") ||
				strings.Contains(low, "%5c") || strings.Contains(low, `\`) || strings.Contains(low, "%25") {
				t.Errorf("upstream %s received %q (path %q)", name, s.URI, s.Path)
			}
		}
	}
}

// homeConfig declares a static home h1 (target h) on up with the relay
// token, and app a on a plain upstream.
func homeConfig(t *testing.T, extra string, home, app *hardUpstream) string {
	t.Helper()
	t.Setenv("WG_HARD_RELAY", hardToken)
	return fmt.Sprintf(`%s
homes:
  - id: h1
    target: h
    provider: static
    endpoint: %q
    probe: tcp
    relay_token: env:WG_HARD_RELAY
apps:
  - slug: a
    upstream: %q
    kind: api
`, extra, home.URL, app.URL)
}

func TestHardeningConnectionHeaderCannotDropRelayOrForwarding(t *testing.T) {
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, "", home, app))
	res, body := hardExchange(t, addr, "GET /node/h/abuse HTTP/1.1\r\nHost: gw\r\n"+
		"Connection: keep-alive, Authorization, X-Forwarded-For, X-Wakegate-Relay\r\n"+
		"Authorization: Bearer x\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("status %d %s", res.StatusCode, body)
	}
	got := home.last(t)
	if v := got.Header.Values("X-Wakegate-Relay"); len(v) != 1 || v[0] != hardToken {
		t.Errorf("relay header at the home = %q; want the token", v)
	}
	if v := got.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q; want 127.0.0.1", v)
	}
	if got.Path != "/node/h/abuse" {
		t.Errorf("home got path %q", got.Path)
	}
}

func TestHardeningClientRelayAndProbeHeadersReplaced(t *testing.T) {
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, "", home, app))
	forged := "X-Wakegate-Relay: forged-relay\r\nx-wakegate-relay: forged-2\r\nX-Wakegate-Probe: forged-probe\r\n"
	for _, target := range []string{"/node/h/x", "/apps/a/x"} {
		res, body := hardExchange(t, addr, "GET "+target+" HTTP/1.1\r\nHost: gw\r\n"+forged+"\r\n")
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", target, res.StatusCode, body)
		}
	}
	h := home.last(t)
	if v := h.Header.Values("X-Wakegate-Relay"); len(v) != 1 || v[0] != hardToken {
		t.Errorf("home: relay header = %q; want only the gateway's token", v)
	}
	a := app.last(t)
	if v := a.Header.Values("X-Wakegate-Relay"); len(v) != 0 {
		t.Errorf("app without a token: relay header = %q; want none", v)
	}
	for name, s := range map[string]hardSeen{"home": h, "app": a} {
		if v := s.Header.Values("X-Wakegate-Probe"); len(v) != 0 {
			t.Errorf("%s: probe header = %q; want none", name, v)
		}
	}
}

func TestHardeningTrustedProxies(t *testing.T) {
	up := newHardUpstream(t, nil)
	trusted := hardGateway(t, appsConfig("server:\n  trusted_proxies: [127.0.0.1/32]\n", map[string]*hardUpstream{"a": up}))
	untrusted := hardGateway(t, appsConfig("", map[string]*hardUpstream{"a": up}))
	req := "GET /apps/a/x HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: 203.0.113.9, 10.0.0.2\r\nX-Request-Id: abc-123\r\n\r\n"

	if res, _ := hardExchange(t, trusted, req); res.StatusCode != 200 {
		t.Fatalf("trusted: %d", res.StatusCode)
	}
	got := up.last(t)
	if v := got.Header.Get("X-Forwarded-For"); v != "203.0.113.9, 10.0.0.2, 127.0.0.1" {
		t.Errorf("trusted: X-Forwarded-For = %q; want the chain kept and extended", v)
	}
	if v := got.Header.Get("X-Request-Id"); v != "abc-123" {
		t.Errorf("trusted: X-Request-Id = %q; want abc-123 kept", v)
	}

	if res, _ := hardExchange(t, untrusted, req); res.StatusCode != 200 {
		t.Fatalf("untrusted: %d", res.StatusCode)
	}
	got = up.last(t)
	if v := got.Header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("untrusted: X-Forwarded-For = %q; want 127.0.0.1 only", v)
	}
	if v := got.Header.Get("X-Request-Id"); v == "abc-123" || v == "" {
		t.Errorf("untrusted: X-Request-Id = %q; want a fresh one from the gateway", v)
	}
}

func TestHardeningWebSocketOrigin(t *testing.T) {
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws := newHardUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if mt, msg, err := c.ReadMessage(); err == nil {
			_ = c.WriteMessage(mt, append([]byte("echo:"), msg...))
		}
	})
	addr := hardGateway(t, appsConfig("server:\n  websocket_origins: [\"https://app.example\"]\n", map[string]*hardUpstream{"ws": ws}))
	cases := []struct {
		name, origin string
		ok           bool
	}{
		{"cross site", "https://evil.example", false},
		{"same host, other port", "http://127.0.0.1:1", false},
		{"null", "null", false},
		{"listed lookalike", "https://app.example.evil", false},
		{"no origin", "", true},
		{"same host", "http://" + addr, true},
		{"listed", "https://app.example", true},
	}
	for _, c := range cases {
		before := ws.conns.Load()
		conn := hardDial(t, addr)
		origin := ""
		if c.origin != "" {
			origin = "Origin: " + c.origin + "\r\n"
		}
		conn.send(t, "GET /apps/ws/socket HTTP/1.1\r\nHost: "+addr+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"+origin+"\r\n")
		res, err := http.ReadResponse(conn.br, &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !c.ok {
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d; want 403", c.name, res.StatusCode)
			}
			if n := ws.conns.Load() - before; n != 0 {
				t.Errorf("%s: the upstream was dialled %d times", c.name, n)
			}
			continue
		}
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Errorf("%s: status %d; want 101", c.name, res.StatusCode)
		}
	}
	// A real client through the gateway, end to end.
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/apps/ws/socket", http.Header{"Origin": {"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := conn.ReadMessage(); err != nil || string(msg) != "echo:hi" {
		t.Fatalf("echo = %q, %v", msg, err)
	}
}

func TestHardeningErrorMapping(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	stall := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	slow := newHardUpstream(t, stall)
	home := newHardUpstream(t, stall)
	t.Setenv("WG_HARD_RELAY", hardToken)
	addr := hardGateway(t, fmt.Sprintf(`proxy:
  response_header_timeout: 300ms
  home_response_header_timeout: 300ms
homes:
  - id: h1
    target: h
    provider: static
    endpoint: %q
    probe: tcp
    relay_token: env:WG_HARD_RELAY
apps:
  - slug: dead
    upstream: "http://%s"
  - slug: slow
    upstream: %q
`, home.URL, deadAddr, slow.URL))

	get := func(path, accept string) (*http.Response, string) {
		return hardExchange(t, addr, "GET "+path+" HTTP/1.1\r\nHost: gw\r\nAccept: "+accept+"\r\n\r\n")
	}
	// An app whose upstream never answered is never published: 503 with
	// its phase and reason (a published route whose upstream dies answers
	// 502 until it is unpublished; see the proxy's own tests).
	res, body := get("/apps/dead/x", "application/json")
	if res.StatusCode != 503 || res.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, `"code":"app_starting"`) ||
		res.Header.Get("X-Wakegate-App-Reason") != "endpoint-not-ready" {
		t.Errorf("dead upstream, JSON: %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	res, body = get("/apps/dead/x", "text/html,application/xhtml+xml")
	if res.StatusCode != 503 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html") {
		t.Errorf("dead upstream, HTML: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	res, body = get("/apps/slow/x", "application/json")
	if res.StatusCode != 504 || !strings.Contains(body, "upstream_timeout") {
		t.Errorf("slow upstream: %d %s; want 504 upstream_timeout", res.StatusCode, body)
	}
	for _, accept := range []string{"application/json", "text/html"} {
		res, body = get("/node/h/slow", accept)
		if res.StatusCode != 504 {
			t.Errorf("slow home (%s): %d %s; want 504", accept, res.StatusCode, body)
		}
		if strings.Contains(body, hardToken) {
			t.Errorf("slow home (%s): the error body contains the relay token", accept)
		}
		for k, vs := range res.Header {
			if strings.Contains(strings.Join(vs, " "), hardToken) {
				t.Errorf("slow home (%s): header %s contains the relay token", accept, k)
			}
		}
	}
	if v := home.last(t).Header.Get("X-Wakegate-Relay"); v != hardToken {
		t.Errorf("the slow home did not get the relay token (%q), so the check above proves nothing", v)
	}
}
