package demohome

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// waitLimit bounds every wait in these tests so a broken server fails the
// test instead of hanging it; it never judges speed.
const waitLimit = 10 * time.Second

func TestParseFlagsDefaults(t *testing.T) {
	t.Setenv(RelayTokenEnv, "")
	o, err := ParseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Addr: DefaultAddr, Target: DefaultTarget, Version: DefaultVersion}
	if o != want {
		t.Fatalf("defaults = %+v, want %+v", o, want)
	}
}

func TestParseFlagsAll(t *testing.T) {
	t.Setenv(RelayTokenEnv, "from-env")
	o, err := ParseFlags([]string{
		"--addr", "127.0.0.1:0", "--target", "alice", "--version", "v2",
		"--boot-delay", "1500ms", "--relay-token", "from-flag", "--notify-ready", "http://127.0.0.1:1/ready",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		Addr: "127.0.0.1:0", Target: "alice", Version: "v2", BootDelay: 1500 * time.Millisecond,
		RelayToken: "from-flag", NotifyReady: "http://127.0.0.1:1/ready",
	}
	if o != want {
		t.Fatalf("options = %+v, want %+v", o, want)
	}
}

func TestParseFlagsRelayTokenFromEnv(t *testing.T) {
	t.Setenv(RelayTokenEnv, "from-env")
	o, err := ParseFlags([]string{"--target", "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if o.RelayToken != "from-env" {
		t.Fatalf("relay token = %q, want the env value", o.RelayToken)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string // a piece of the error naming the flag or argument
	}{
		{[]string{"--boot-delay", "soon"}, "boot-delay"},
		{[]string{"--boot-delay", "-1s"}, "--boot-delay"},
		{[]string{"--addr", "no-port"}, "--addr"},
		{[]string{"--target", ""}, "--target"},
		{[]string{"--target", "a/b"}, "--target"},
		{[]string{"--version", ""}, "--version"},
		{[]string{"--notify-ready", "ftp://x/y"}, "--notify-ready"},
		{[]string{"--notify-ready", "::bad"}, "--notify-ready"},
		{[]string{"--listen-fd", "2"}, "--listen-fd"},
		{[]string{"--listen-fd", "three"}, "listen-fd"},
		{[]string{"--unix", "/tmp/h.sock", "--listen-fd", "3"}, "--unix and --listen-fd"},
		{[]string{"--unix", "/" + strings.Repeat("s", 107)}, "--unix"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra"}, `"extra"`},
	}
	for _, c := range cases {
		_, err := ParseFlags(c.args)
		if err == nil {
			t.Errorf("ParseFlags(%q): no error", c.args)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFlags(%q) = %q, want it to name %s", c.args, err, c.want)
		}
	}
}

func TestParseFlagsHelp(t *testing.T) {
	_, err := ParseFlags([]string{"-h"})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(err.Error(), "boot-delay") {
		t.Fatalf("help does not list the flags: %q", err)
	}
}

// newServer serves a fresh handler for o on a loopback httptest server.
func newServer(t *testing.T, o Options) (*Handler, *httptest.Server) {
	t.Helper()
	h := NewHandler(o)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		h.CloseWebSockets()
		ts.Close()
	})
	return h, ts
}

type result struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string, body io.Reader, hdr map[string]string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return result{resp.StatusCode, resp.Header, string(b)}
}

func get(t *testing.T, url string) result {
	t.Helper()
	return do(t, http.MethodGet, url, nil, nil)
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
	return v
}

var prefixes = []string{"/node/alice", "/apps/demo"}

func TestPage(t *testing.T) {
	_, ts := newServer(t, Options{Target: "alice", Version: "v7"})
	for _, p := range prefixes {
		for _, path := range []string{p, p + "/"} {
			r := get(t, ts.URL+path)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: status %d", path, r.status)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Fatalf("GET %s: Content-Type %q", path, ct)
			}
			for _, want := range []string{"alice", "v7", path} {
				if !strings.Contains(r.body, want) {
					t.Fatalf("GET %s: page does not name %q:\n%s", path, want, r.body)
				}
			}
		}
	}
	if r := do(t, http.MethodPost, ts.URL+"/apps/demo/", nil, nil); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("POST page: status %d, want 405", r.status)
	}
}

func TestRootRoutes(t *testing.T) {
	_, ts := newServer(t, Options{Version: "1.2.3"})
	if r := get(t, ts.URL+"/version"); r.status != 200 || r.body != "1.2.3" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/version = %d %q %q", r.status, r.body, r.header.Get("Content-Type"))
	}
	if r := get(t, ts.URL+"/healthz"); r.status != 200 || r.body != "ok" {
		t.Fatalf("/healthz = %d %q", r.status, r.body)
	}
	for _, path := range []string{"/", "/nope", "/node", "/node/", "/apps/demox", "/apps/other/x", "/_demo/other", "/node/alice/nope", "/apps/demo/ws/x"} {
		r := get(t, ts.URL+path)
		if r.status != http.StatusNotFound {
			t.Fatalf("GET %s: status %d, want 404", path, r.status)
		}
		if e := decode[errorBody](t, r); e.Error == "" {
			t.Fatalf("GET %s: 404 body %q has no error", path, r.body)
		}
	}
}

func TestWhoami(t *testing.T) {
	_, ts := newServer(t, Options{Target: "alice"})
	for _, p := range prefixes {
		r := do(t, http.MethodPost, ts.URL+p+"/whoami?a=1&b=two", strings.NewReader("hello"), map[string]string{"X-Test": "yes"})
		if r.status != 200 {
			t.Fatalf("%s/whoami: status %d", p, r.status)
		}
		if len(r.header.Values("X-Echo-X-Test")) != 0 {
			t.Fatalf("%s/whoami echoed headers without echo=1", p)
		}
		w := decode[whoami](t, r)
		if w.Method != "POST" || w.Path != p+"/whoami" || w.RawQuery != "a=1&b=two" || w.BodyBytes != 5 ||
			w.Host != strings.TrimPrefix(ts.URL, "http://") || w.RemoteAddr == "" || w.Target != "alice" ||
			w.RequestURI != p+"/whoami?a=1&b=two" {
			t.Fatalf("%s/whoami = %+v", p, w)
		}
		if got := w.Headers.Get("X-Test"); got != "yes" {
			t.Fatalf("%s/whoami headers = %v", p, w.Headers)
		}
	}
	// An escaped path keeps its raw form.
	w := decode[whoami](t, get(t, ts.URL+"/node/a%2Cb/whoami"))
	if w.Path != "/node/a,b/whoami" || w.RawPath != "/node/a%2Cb/whoami" {
		t.Fatalf("escaped whoami path=%q raw_path=%q", w.Path, w.RawPath)
	}
}

func TestWhoamiEcho(t *testing.T) {
	_, ts := newServer(t, Options{})
	r := do(t, http.MethodGet, ts.URL+"/node/x/whoami?echo=1", nil, map[string]string{
		"Authorization": "Bearer secret", "Cookie": "session=s1", "X-Test": "yes",
	})
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	for name, want := range map[string]string{"X-Echo-Authorization": "Bearer secret", "X-Echo-Cookie": "session=s1", "X-Echo-X-Test": "yes"} {
		if got := r.header.Get(name); got != want {
			t.Fatalf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestSSEFull(t *testing.T) {
	_, ts := newServer(t, Options{})
	for _, p := range prefixes {
		r := get(t, ts.URL+p+"/sse?n=3&interval=1ms")
		if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s/sse: %d %q", p, r.status, r.header.Get("Content-Type"))
		}
		if want := "data: 1\n\ndata: 2\n\ndata: 3\n\n"; r.body != want {
			t.Fatalf("%s/sse body = %q, want %q", p, r.body, want)
		}
	}
	if r := get(t, ts.URL+"/apps/demo/sse"); r.body != "data: 1\n\ndata: 2\n\ndata: 3\n\n" {
		t.Fatalf("default sse body = %q", r.body)
	}
	for _, q := range []string{"n=-1", "n=x", "interval=x", "interval=-1s"} {
		if r := get(t, ts.URL+"/apps/demo/sse?"+q); r.status != http.StatusBadRequest {
			t.Fatalf("sse?%s: status %d, want 400", q, r.status)
		}
	}
}

// TestSSEEventByEvent proves each event is flushed on its own: the first
// event arrives while the second is still an hour away, and the stream ends
// when the client goes away (ts.Close in cleanup waits for the handler).
func TestSSEEventByEvent(t *testing.T) {
	_, ts := newServer(t, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/node/alice/sse?n=2&interval=1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for _, want := range []string{"data: 1\n", "\n"} {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading first event: %v (got %q)", err, line)
		}
		if line != want {
			t.Fatalf("line = %q, want %q", line, want)
		}
	}
	cancel()
	if _, err := br.ReadString('\n'); err == nil {
		t.Fatal("read more after the client went away")
	}
}

func TestSlow(t *testing.T) {
	_, ts := newServer(t, Options{})
	if r := get(t, ts.URL+"/node/alice/slow?d=5ms"); r.status != 200 || r.body != "slow done" {
		t.Fatalf("slow = %d %q", r.status, r.body)
	}
	if r := get(t, ts.URL+"/apps/demo/slow?d=bad"); r.status != http.StatusBadRequest {
		t.Fatalf("slow?d=bad: status %d", r.status)
	}
	// A client that gives up ends the wait (ts.Close in cleanup waits for it).
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/apps/demo/slow?d=1h", nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("slow?d=1h answered before the hour")
		}
	case <-time.After(waitLimit):
		t.Fatal("cancelled slow request did not return")
	}
}

func TestStatus(t *testing.T) {
	_, ts := newServer(t, Options{})
	for _, p := range prefixes {
		for _, code := range []int{200, 204, 401, 418, 503} {
			r := get(t, ts.URL+p+"/status/"+strconv.Itoa(code))
			if r.status != code {
				t.Fatalf("%s/status/%d: status %d", p, code, r.status)
			}
			if code == 204 {
				continue
			}
			if body := decode[struct{ Status int }](t, r); body.Status != code {
				t.Fatalf("%s/status/%d: body %q", p, code, r.body)
			}
		}
	}
	for _, s := range []string{"abc", "99", "600", ""} {
		if r := get(t, ts.URL+"/apps/demo/status/"+s); r.status != http.StatusBadRequest {
			t.Fatalf("/status/%s: status %d, want 400", s, r.status)
		}
	}
}

func TestBytes(t *testing.T) {
	_, ts := newServer(t, Options{})
	for _, p := range prefixes {
		for _, n := range []int{0, 1, 1000, 100000} {
			r := get(t, ts.URL+p+"/bytes/"+strconv.Itoa(n))
			if r.status != 200 || len(r.body) != n || r.header.Get("Content-Length") != strconv.Itoa(n) {
				t.Fatalf("%s/bytes/%d: status %d, %d bytes, Content-Length %q", p, n, r.status, len(r.body), r.header.Get("Content-Length"))
			}
		}
	}
	if r := do(t, http.MethodHead, ts.URL+"/apps/demo/bytes/10", nil, nil); r.status != 200 || r.header.Get("Content-Length") != "10" || r.body != "" {
		t.Fatalf("HEAD bytes/10: %d %q %q", r.status, r.header.Get("Content-Length"), r.body)
	}
	for _, s := range []string{"-1", "x", "2147483648"} {
		if r := get(t, ts.URL+"/apps/demo/bytes/"+s); r.status != http.StatusBadRequest {
			t.Fatalf("/bytes/%s: status %d, want 400", s, r.status)
		}
	}
}

func wsURL(ts *httptest.Server, path string) string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + path
}

func dialWS(t *testing.T, url string, hdr http.Header) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, url, hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readMsg(t *testing.T, c *websocket.Conn) (int, string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	mt, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return mt, string(b)
}

func TestWebSocketHelloAndEcho(t *testing.T) {
	_, ts := newServer(t, Options{Target: "alice-home", Version: "v3"})
	paths := []string{"/node/alice/ws", "/node/alice", "/node/alice/", "/apps/demo/ws", "/apps/demo", "/apps/demo/"}
	for _, path := range paths {
		c := dialWS(t, wsURL(ts, path), http.Header{"Origin": {"https://elsewhere.example"}})
		mt, hello := readMsg(t, c)
		if mt != websocket.TextMessage {
			t.Fatalf("%s: hello type %d", path, mt)
		}
		var h struct{ Hello, Version string }
		if err := json.Unmarshal([]byte(hello), &h); err != nil || h.Hello != "alice-home" || h.Version != "v3" {
			t.Fatalf("%s: hello = %q (%v)", path, hello, err)
		}
		for _, m := range []struct {
			mt   int
			data string
		}{{websocket.TextMessage, "hi"}, {websocket.BinaryMessage, "\x00\x01\x02"}, {websocket.TextMessage, ""}} {
			if err := c.WriteMessage(m.mt, []byte(m.data)); err != nil {
				t.Fatal(err)
			}
			mt, got := readMsg(t, c)
			if mt != m.mt || got != m.data {
				t.Fatalf("%s: echo = (%d %q), want (%d %q)", path, mt, got, m.mt, m.data)
			}
		}
		// A clean close from the peer is answered with a close frame.
		if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
			t.Fatal(err)
		}
		if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Fatalf("%s: after close: %v, want a normal close", path, err)
		}
	}
}

func TestWebSocketRequiresUpgradeAtWS(t *testing.T) {
	_, ts := newServer(t, Options{})
	if r := get(t, ts.URL+"/node/alice/ws"); r.status != http.StatusBadRequest {
		t.Fatalf("plain GET /ws: status %d, want 400", r.status)
	}
}

func TestRelayToken(t *testing.T) {
	_, ts := newServer(t, Options{RelayToken: "s3cret"})
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/node/alice/whoami", "", 401},
		{"/node/alice/whoami", "wrong", 401},
		{"/node/alice/whoami", "s3cret", 200},
		{"/node/alice", "", 401},
		{"/node/", "", 401},
		{"/apps/demo/whoami", "", 200},
		{"/healthz", "", 200},
		{"/version", "", 200},
	} {
		hdr := map[string]string{}
		if c.token != "" {
			hdr[RelayHeader] = c.token
		}
		r := do(t, http.MethodGet, ts.URL+c.path, nil, hdr)
		if r.status != c.want {
			t.Fatalf("GET %s with token %q: status %d, want %d", c.path, c.token, r.status, c.want)
		}
		if r.status == 401 {
			if e := decode[errorBody](t, r); e.Error == "" {
				t.Fatalf("401 body %q has no error", r.body)
			}
		}
	}
	// The readiness probe's shape: an upgrade at /node/{target} with the token.
	_, resp, err := websocket.DefaultDialer.DialContext(t.Context(), wsURL(ts, "/node/alice"), nil)
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("upgrade without token: err %v, resp %v; want 401", err, resp)
	}
	c := dialWS(t, wsURL(ts, "/node/alice"), http.Header{RelayHeader: {"s3cret"}})
	if _, hello := readMsg(t, c); !strings.Contains(hello, `"hello":"demo"`) {
		t.Fatalf("hello = %q", hello)
	}
}

func TestStats(t *testing.T) {
	h, ts := newServer(t, Options{})
	get(t, ts.URL+"/healthz")
	get(t, ts.URL+"/node/alice/whoami")
	get(t, ts.URL+"/node/alice/whoami")
	get(t, ts.URL+"/nope")
	get(t, ts.URL+"/_demo/stats") // not counted
	c := dialWS(t, wsURL(ts, "/node/alice"), nil)
	readMsg(t, c)

	s := decode[Stats](t, get(t, ts.URL+"/_demo/stats"))
	if s.Requests != 5 || s.WSUpgrades != 1 || s.WSOpen != 1 || s.ListeningAtUnixNano != 0 {
		t.Fatalf("stats = %+v", s)
	}
	want := map[string]int64{"/healthz": 1, "/node/alice/whoami": 2, "/nope": 1, "/node/alice": 1}
	if len(s.Paths) != len(want) {
		t.Fatalf("paths = %v, want %v", s.Paths, want)
	}
	for p, n := range want {
		if s.Paths[p] != n {
			t.Fatalf("paths = %v, want %v", s.Paths, want)
		}
	}

	// CloseWebSockets waits for the socket's handler, so ws_open is exact after it.
	h.CloseWebSockets()
	if s := h.Stats(); s.WSOpen != 0 || s.WSUpgrades != 1 {
		t.Fatalf("after CloseWebSockets: %+v", s)
	}
}

func TestCloseWebSocketsSendsGoingAway(t *testing.T) {
	h, ts := newServer(t, Options{})
	c := dialWS(t, wsURL(ts, "/apps/demo/ws"), nil)
	readMsg(t, c)
	h.CloseWebSockets()
	if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("read after CloseWebSockets: %v, want going away", err)
	}
	// Later upgrades are closed at once.
	c2 := dialWS(t, wsURL(ts, "/apps/demo/ws"), nil)
	if err := c2.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("read on a late socket: %v, want going away", err)
	}
	if s := h.Stats(); s.WSOpen != 0 || s.WSUpgrades != 2 {
		t.Fatalf("stats = %+v", s)
	}
}

// logSink collects Run's log and reports the address of the listening line.
type logSink struct {
	mu      sync.Mutex
	buf     strings.Builder
	addr    chan string
	found   bool
	changed chan struct{} // signalled (without blocking) on every write
}

var listeningRE = regexp.MustCompile(`(?m)^listening addr=(\S+) version=(\S+)$`)

func newLogSink() *logSink {
	return &logSink{addr: make(chan string, 1), changed: make(chan struct{}, 1)}
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if m := listeningRE.FindStringSubmatch(s.buf.String()); m != nil && !s.found {
		s.found = true
		s.addr <- m[1]
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until the log contains want.
func (s *logSink) waitFor(t *testing.T, want string) {
	t.Helper()
	limit := time.After(waitLimit)
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.changed:
		case <-limit:
			t.Fatalf("log lacks %q:\n%s", want, s.String())
		}
	}
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startRun runs Run in the background; stop cancels it and returns its error.
func startRun(t *testing.T, o Options) (sink *logSink, stop func() error) {
	t.Helper()
	sink = newLogSink()
	stop = testbin.Background(t, func(ctx context.Context) error { return Run(ctx, o, sink) })
	return sink, stop
}

func waitAddr(t *testing.T, sink *logSink) string {
	t.Helper()
	select {
	case a := <-sink.addr:
		return a
	case <-time.After(waitLimit):
		t.Fatalf("no listening line; log so far:\n%s", sink.String())
		return ""
	}
}

func TestRunServesAndShutsDown(t *testing.T) {
	before := time.Now()
	sink, stop := startRun(t, Options{Addr: "127.0.0.1:0", Target: "alice", Version: "v9", RelayToken: "tok"})
	addr := waitAddr(t, sink)
	base := "http://" + addr

	if r := get(t, base+"/version"); r.body != "v9" {
		t.Fatalf("/version = %q", r.body)
	}
	if r := get(t, base+"/node/alice/"); r.status != 401 {
		t.Fatalf("no token: status %d, want 401", r.status)
	}
	if r := do(t, http.MethodGet, base+"/node/alice/", nil, map[string]string{RelayHeader: "tok"}); r.status != 200 {
		t.Fatalf("with token: status %d", r.status)
	}
	s := decode[Stats](t, get(t, base+"/_demo/stats"))
	if s.ListeningAtUnixNano < before.UnixNano() || s.Requests != 3 {
		t.Fatalf("stats = %+v (started at %d)", s, before.UnixNano())
	}

	// An open WebSocket is closed by shutdown, and Run still returns.
	c := dialWS(t, "ws://"+addr+"/node/alice/ws", http.Header{RelayHeader: {"tok"}})
	readMsg(t, c)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := c.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("socket after shutdown: %v, want going away", err)
	}
	if _, err := net.DialTimeout("tcp", addr, waitLimit); err == nil {
		t.Fatal("still accepting after Run returned")
	}
	for _, want := range []string{"listening addr=" + addr + " version=v9\n", "shutting down\n", "stopped\n"} {
		if !strings.Contains(sink.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, sink.String())
		}
	}
}

func TestRunBootDelayHonoured(t *testing.T) {
	const delay = 200 * time.Millisecond
	start := time.Now()
	sink, stop := startRun(t, Options{Addr: "127.0.0.1:0", BootDelay: delay})
	addr := waitAddr(t, sink)
	if waited := time.Since(start); waited < delay {
		t.Fatalf("listening after %s, before the boot delay %s", waited, delay)
	}
	s := decode[Stats](t, get(t, "http://"+addr+"/_demo/stats"))
	if got := time.Duration(s.ListeningAtUnixNano - start.UnixNano()); got < delay {
		t.Fatalf("listening_at is %s after start, before the boot delay %s", got, delay)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRunCancelDuringBootDelay(t *testing.T) {
	// Reserve a port, free it, and ask Run to listen there after an hour.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	sink, stop := startRun(t, Options{Addr: addr, BootDelay: time.Hour})
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err == nil {
		conn.Close()
		t.Fatal("something listens during the boot delay")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel in boot delay: %v", err)
	}
	if strings.Contains(sink.String(), "listening") {
		t.Fatalf("Run listened:\n%s", sink.String())
	}
}

func TestRunNotifyReady(t *testing.T) {
	type note struct {
		method, token string
		body          struct{ Target, Version, Addr string }
	}
	notes := make(chan note, 4)
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n note
		n.method = r.Method
		n.token = r.Header.Get(RelayHeader)
		_ = json.NewDecoder(r.Body).Decode(&n.body)
		notes <- n
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ready.Close()

	sink, stop := startRun(t, Options{Addr: "127.0.0.1:0", Target: "bob", RelayToken: "tok", NotifyReady: ready.URL + "/ready"})
	addr := waitAddr(t, sink)
	var n note
	select {
	case n = <-notes:
	case <-time.After(waitLimit):
		t.Fatal("no notify-ready POST")
	}
	if n.method != http.MethodPost || n.token != "tok" || n.body.Addr != addr || n.body.Target != "bob" || n.body.Version != DefaultVersion {
		t.Fatalf("notify = %+v, want a POST with the token for %s", n, addr)
	}
	sink.waitFor(t, "notify-ready url="+ready.URL+"/ready status=204")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Fatal("notify-ready was sent more than once")
	}
}

func TestRunNotifyReadyFailureIsLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/ready"
	ln.Close()
	sink, stop := startRun(t, Options{Addr: "127.0.0.1:0", NotifyReady: dead})
	addr := waitAddr(t, sink)
	if r := get(t, "http://"+addr+"/healthz"); r.body != "ok" {
		t.Fatalf("/healthz = %q", r.body)
	}
	sink.waitFor(t, "notify-ready url="+dead+" error=")
	if err := stop(); err != nil {
		t.Fatalf("a failed notify must not fail Run: %v", err)
	}
}

func TestRunListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Run(t.Context(), Options{Addr: ln.Addr().String()}, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run on a taken port = %v, want a listen error", err)
	}
}

// A home given its socket (--listen-fd) answers the connections made while
// it booted, from the socket's accept queue, and closes the socket when it
// stops.
func TestRunInheritedListener(t *testing.T) {
	const delay = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	// Run takes the descriptor it is given and closes it: hand it a
	// copy of its own, and keep none here.
	fd, err := syscall.Dup(int(f.Fd()))
	_ = f.Close()
	_ = ln.Close()
	if err != nil {
		t.Fatal(err)
	}

	// The caller connects and sends its request before the home runs.
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatalf("dial the socket before the home runs: %v", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /node/alice/whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sink, stop := startRun(t, Options{ListenFD: fd, BootDelay: delay, Target: "alice"})
	if err := c.SetDeadline(time.Now().Add(waitLimit)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the request sent during the boot: %v", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the request sent during the boot: status %d", res.StatusCode)
	}
	if waited := time.Since(start); waited < delay {
		t.Fatalf("answered after %s, before the boot delay %s", waited, delay)
	}
	if got := waitAddr(t, sink); got != addr {
		t.Fatalf("listening line names %s, want the inherited socket's %s", got, addr)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c2, err := net.DialTimeout("tcp", addr, waitLimit); err == nil {
		_ = c2.Close()
		t.Fatal("the inherited socket still accepts after Run returned")
	}
}

// A descriptor that is not a listening socket is refused with an error that
// names the flag and says what the descriptor is not.
func TestRunListenFDNotASocket(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(t.Context(), Options{ListenFD: fd}, io.Discard)
	if err == nil {
		t.Fatal("Run served on a pipe")
	}
	for _, want := range []string{"--listen-fd", "not an inherited listening socket", "socket operation on non-socket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestRunUnixSocket serves on a Unix socket (--unix) over a stale socket
// file, checks the relay token there too, and removes its socket when it
// returns.
func TestRunUnixSocket(t *testing.T) {
	sock := t.TempDir() + "/home.sock"
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	_ = stale.Close()

	o, err := ParseFlags([]string{"--unix", sock, "--target", "alice", "--relay-token", "tok"})
	if err != nil {
		t.Fatal(err)
	}
	sink, stop := startRun(t, o)
	if addr := waitAddr(t, sink); addr != sock {
		t.Fatalf("listening on %q, want %s", addr, sock)
	}
	c := &http.Client{Timeout: waitLimit, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"tok-", http.StatusUnauthorized}, {"tok", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, "http://localhost/node/alice/whoami", nil)
		if tc.token != "" {
			req.Header.Set(RelayHeader, tc.token)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("token %q: status %d, want %d", tc.token, res.StatusCode, tc.want)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Run returned: %v", err)
	}
}

func TestRunLogsEveryRequest(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "requests.log")
	before := time.Now().UnixNano()
	sink, stop := startRun(t, Options{Addr: "127.0.0.1:0", RequestLog: logPath})
	addr := waitAddr(t, sink)
	for _, p := range []string{"/node/alice/whoami", "/healthz"} {
		res, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("request log %q, want two lines", b)
	}
	var at int64
	var pid int
	var path string
	if _, err := fmt.Sscanf(lines[0], "%d %d %s", &at, &pid, &path); err != nil {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	if at < before || pid != os.Getpid() || path != "/node/alice/whoami" {
		t.Fatalf("line %q: want a time after %d, pid %d and the path", lines[0], before, os.Getpid())
	}
}
