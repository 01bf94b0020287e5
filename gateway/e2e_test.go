package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// e2eWhoami is the demo home's /whoami answer.
type e2eWhoami struct {
	Method   string      `json:"method"`
	Path     string      `json:"path"`
	RawQuery string      `json:"raw_query"`
	Host     string      `json:"host"`
	Headers  http.Header `json:"headers"`
}

// e2eErrorBody is the gateway's JSON error answer.
type e2eErrorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// e2eDemoHome runs `wakegate demo-home` directly on a free loopback port
// and returns its address once it answers.
func e2eDemoHome(t testing.TB) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	p := testbin.Start(t, t.TempDir(), nil, "demo-home", "--addr", addr, "--target", "direct")
	testbin.Eventually(t, "demo home "+addr, func() bool {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			if _, exited := p.Wait(0); exited {
				t.Fatalf("demo home exited:\n%s", p.Output())
			}
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return addr
}

// e2eCountingListener counts the connections accepted by a real HTTP server
// that carried a request other than the gateway's own app observations
// (direct health checks and self-probes, which run on their own schedule).
type e2eCountingListener struct {
	net.Listener
	n atomic.Int64
}

func (l *e2eCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c = &e2eCountedConn{Conn: c, n: &l.n}
	}
	return c, err
}

// e2eCountedConn adds itself to n once, at its first request that is not
// an app observation.
type e2eCountedConn struct {
	net.Conn
	n       *atomic.Int64
	counted atomic.Bool
}

type e2eConnKey struct{}

// e2eCountingUpstream serves 200 "counted" and counts its connections.
func e2eCountingUpstream(t testing.TB) *e2eCountingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &e2eCountingListener{Listener: ln}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(e2eConnKey{}).(*e2eCountedConn); ok && !strings.HasPrefix(r.UserAgent(), "wakegate-") && c.counted.CompareAndSwap(false, true) {
			c.n.Add(1)
		}
		_, _ = io.WriteString(w, "counted")
	}), ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, e2eConnKey{}, c) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(cl)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return cl
}

// e2eClient returns an HTTP client with its own keep-alive pool, closed
// when the test ends.
func e2eClient(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 200}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

func e2eGet(t testing.TB, c *http.Client, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return res, body
}

func e2eGetWhoami(t testing.TB, c *http.Client, url string, header http.Header) (*http.Response, e2eWhoami, []byte) {
	t.Helper()
	res, body := e2eGet(t, c, url, header)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %s", url, res.StatusCode, body)
	}
	var w e2eWhoami
	if err := json.Unmarshal(body, &w); err != nil {
		t.Fatalf("GET %s: decode whoami: %v\n%s", url, err, body)
	}
	return res, w, body
}

const e2eConfig = `
listen: "%ADDR%"
data_dir: "%DATA%"
log:
  level: info
server:
  drain_grace: 1s
wake:
  idle_timeout: 0s
homes:
  - id: demo
    target: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
  - slug: strip
    upstream: "http://%HOME%/node/direct"
    strip_prefix: true
  - slug: counted
    upstream: "http://%COUNTED%"
    kind: api
`

// TestEndToEnd runs the real binary with an exec home and three apps, and
// drives it with real clients.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	home := e2eDemoHome(t)
	counted := e2eCountingUpstream(t)
	cfg := strings.NewReplacer("%HOME%", home, "%COUNTED%", counted.Addr().String()).Replace(e2eConfig)
	gw := testbin.Serve(t, cfg)
	base := "http://" + gw.Addr
	c := e2eClient(t)

	t.Run("HTTP", func(t *testing.T) {
		forged := http.Header{
			"X-Forwarded-For":   {"203.0.113.9"},
			"X-Forwarded-Proto": {"https"},
			"X-Forwarded-Host":  {"evil.example"},
			"X-Request-Id":      {"client-chosen-id"},
		}
		for _, path := range []string{"/node/demo/whoami", "/apps/demo/whoami"} {
			res, w, _ := e2eGetWhoami(t, c, base+path+"?q=1", forged)
			if w.Path != path || w.RawQuery != "q=1" {
				t.Errorf("%s: home saw path %q query %q", path, w.Path, w.RawQuery)
			}
			h := w.Headers
			if got := h.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
				t.Errorf("%s: X-Forwarded-For = %q, want [127.0.0.1] (untrusted peer's chain dropped)", path, got)
			}
			if got := h.Values("X-Forwarded-Proto"); len(got) != 1 || got[0] != "http" {
				t.Errorf("%s: X-Forwarded-Proto = %q, want [http]", path, got)
			}
			if got := h.Values("X-Forwarded-Host"); len(got) != 1 || got[0] != gw.Addr {
				t.Errorf("%s: X-Forwarded-Host = %q, want [%s]", path, got, gw.Addr)
			}
			if got := h.Values("X-Request-Id"); len(got) != 1 || got[0] == "" || got[0] == "client-chosen-id" {
				t.Errorf("%s: X-Request-Id = %q, want one fresh id (an untrusted peer's is replaced)", path, got)
			}
			if got := h.Get("X-Wakegate-Relay"); got != "" {
				t.Errorf("%s: a home without a relay token received X-Wakegate-Relay %q", path, got)
			}
			if res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: Content-Type %q", path, res.Header.Get("Content-Type"))
			}
		}
		_, w1, _ := e2eGetWhoami(t, c, base+"/node/demo/whoami", nil)
		_, w2, _ := e2eGetWhoami(t, c, base+"/node/demo/whoami", nil)
		id1, id2 := w1.Headers.Get("X-Request-Id"), w2.Headers.Get("X-Request-Id")
		if id1 == "" || id2 == "" || id1 == id2 {
			t.Errorf("request ids %q and %q: want two distinct non-empty ids", id1, id2)
		}
		res, body := e2eGet(t, c, base+"/node/demo/bytes/5000", nil)
		if res.StatusCode != http.StatusOK || len(body) != 5000 || res.ContentLength != 5000 {
			t.Errorf("bytes/5000: status %d, %d bytes, Content-Length %d", res.StatusCode, len(body), res.ContentLength)
		}
		res, body = e2eGet(t, c, base+"/apps/demo/status/418", nil)
		if res.StatusCode != http.StatusTeapot || !bytes.Contains(body, []byte(`"status":418`)) {
			t.Errorf("status/418: got %d %s", res.StatusCode, body)
		}
	})

	t.Run("StripPrefix", func(t *testing.T) {
		_, w, _ := e2eGetWhoami(t, c, base+"/apps/strip/whoami?a=b", nil)
		if w.Path != "/node/direct/whoami" || w.RawQuery != "a=b" {
			t.Errorf("upstream saw path %q query %q, want /node/direct/whoami a=b", w.Path, w.RawQuery)
		}
		noFollow := &http.Client{Transport: c.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
		res, _ := e2eGet(t, noFollow, base+"/apps/strip", nil)
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != "/apps/strip/" {
			t.Errorf("/apps/strip: status %d Location %q, want 308 to /apps/strip/", res.StatusCode, res.Header.Get("Location"))
		}
	})

	t.Run("UnknownRoute", func(t *testing.T) {
		for _, tc := range []struct{ path, code string }{
			{"/apps/nope/x", "app_not_found"},
			{"/apps/nope", "app_not_found"},
			{"/node/nope/whoami", "home_not_found"},
			{"/elsewhere", "not_found"},
		} {
			res, body := e2eGet(t, c, base+tc.path, http.Header{"Accept": {"application/json"}})
			var eb e2eErrorBody
			if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") ||
				json.Unmarshal(body, &eb) != nil || eb.Error.Code != tc.code || eb.Error.RequestID == "" {
				t.Errorf("%s as JSON: %d %q %s; want 404 JSON with code %s and a request id",
					tc.path, res.StatusCode, res.Header.Get("Content-Type"), body, tc.code)
			}
			res, body = e2eGet(t, c, base+tc.path, http.Header{"Accept": {"text/html,application/xhtml+xml"}})
			if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
				!bytes.HasPrefix(body, []byte("<!doctype html>")) || !bytes.Contains(body, []byte(tc.code)) {
				t.Errorf("%s as HTML: %d %q %s; want a 404 page naming %s",
					tc.path, res.StatusCode, res.Header.Get("Content-Type"), body, tc.code)
			}
		}
		if n := counted.n.Load(); n != 0 {
			t.Errorf("requests for unknown routes dialled an upstream: %d connections", n)
		}
		// The counter does count: a request for the app reaches it.
		res, body := e2eGet(t, c, base+"/apps/counted/x", nil)
		if res.StatusCode != http.StatusOK || string(body) != "counted" || counted.n.Load() == 0 {
			t.Errorf("/apps/counted/x: %d %q with %d connections", res.StatusCode, body, counted.n.Load())
		}
	})

	t.Run("Streaming", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// With an hour between events the stream lasts two hours, so the
		// first event can only arrive if it is flushed through at once.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/node/demo/sse?n=3&interval=1h", nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("sse: status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
		}
		br := bufio.NewReader(res.Body)
		if ev := e2eReadEvent(t, br); ev != "data: 1" {
			t.Fatalf("first event %q, want data: 1", ev)
		}
		if br.Buffered() != 0 {
			t.Errorf("%d more bytes arrived with the first event", br.Buffered())
		}
		cancel()
		if rest, err := io.ReadAll(br); err == nil || len(rest) != 0 {
			t.Errorf("after the first event: %q, %v; want the stream still open until cancelled", rest, err)
		}

		res, body := e2eGet(t, c, base+"/node/demo/sse?n=3&interval=300ms", nil)
		if res.StatusCode != http.StatusOK || string(body) != "data: 1\n\ndata: 2\n\ndata: 3\n\n" {
			t.Errorf("sse n=3: %d %q", res.StatusCode, body)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		for _, path := range []string{"/node/demo/ws", "/apps/demo/ws"} {
			conn, res, err := websocket.DefaultDialer.Dial("ws://"+gw.Addr+path, nil)
			if err != nil {
				t.Fatalf("dial %s: %v", path, err)
			}
			if res.StatusCode != http.StatusSwitchingProtocols {
				t.Errorf("%s: upgrade status %d", path, res.StatusCode)
			}
			e2eHello(t, conn, "demo")
			e2eEcho(t, conn, websocket.TextMessage, []byte("hello through the gateway"))
			e2eEcho(t, conn, websocket.BinaryMessage, []byte{0, 1, 2, 0xfe, 0xff})
			e2eEcho(t, conn, websocket.BinaryMessage, bytes.Repeat([]byte{7}, 100<<10))
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			conn.Close()
		}
	})
}

const e2eRelayConfig = `
listen: "%ADDR%"
data_dir: "%DATA%"
server:
  drain_grace: 1s
wake:
  idle_timeout: 0s
homes:
  - id: secret
    relay_token: env:E2E_RELAY_SECRET
`

// TestRelayToken runs a home that requires its relay token: the demo home
// reads it from WAKEGATE_RELAY_TOKEN, which the exec provider sets to the
// home's own token (the gateway's E2E_RELAY_SECRET is not passed on), and
// answers 401 to any /node/ request without that exact
// token as the first X-Wakegate-Relay value. So every 200 below proves the
// token arrived and a client's forged value did not.
func TestRelayToken(t *testing.T) {
	t.Parallel()
	token := "relay-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-secret-value"
	stars := strings.Repeat("*", len(token))
	gw := testbin.ServeEnv(t, t.TempDir(), []string{"E2E_RELAY_SECRET=" + token}, e2eRelayConfig)
	base := "http://" + gw.Addr
	c := e2eClient(t)

	noLeak := func(what string, h http.Header, body []byte) {
		t.Helper()
		for k, vs := range h {
			if strings.EqualFold(k, "X-Wakegate-Relay") {
				t.Errorf("%s: the caller sees a %s header", what, k)
			}
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("%s: response header %s leaks the relay token", what, k)
				}
			}
		}
		if bytes.Contains(body, []byte(token)) {
			t.Errorf("%s: response body leaks the relay token: %s", what, body)
		}
	}

	forged := http.Header{"X-Wakegate-Relay": {"forged-relay"}, "X-Wakegate-Probe": {"forged-probe"}}
	res, w, body := e2eGetWhoami(t, c, base+"/node/secret/whoami", forged)
	// The home's own report of the token is masked on the way out; its
	// length and count still show one value of the token's size.
	if got := w.Headers.Values("X-Wakegate-Relay"); len(got) != 1 || got[0] != stars {
		t.Errorf("home reported X-Wakegate-Relay %q, want one masked value of the token's length", got)
	}
	if got := w.Headers.Values("X-Wakegate-Probe"); len(got) != 0 {
		t.Errorf("home received a client's X-Wakegate-Probe %q", got)
	}
	noLeak("whoami", res.Header, body)

	// The home echoes every request header into response headers and body.
	res, _, body = e2eGetWhoami(t, c, base+"/node/secret/whoami?echo=1", nil)
	if got := res.Header.Get("X-Echo-X-Wakegate-Relay"); got != stars {
		t.Errorf("echoed relay header %q, want it masked", got)
	}
	noLeak("echo", res.Header, body)
	if n, _ := strconv.Atoi(res.Header.Get("Content-Length")); n != len(body) {
		t.Errorf("echo: Content-Length %d, body %d bytes", n, len(body))
	}

	// A Connection header naming the relay and forwarding headers must not
	// let the caller remove what the gateway sets.
	hop := http.Header{"Connection": {"X-Wakegate-Relay, X-Forwarded-For"}, "X-Forwarded-For": {"198.51.100.1"}}
	res, w, body = e2eGetWhoami(t, c, base+"/node/secret/whoami", hop)
	if got := w.Headers.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("with Connection naming X-Forwarded-For, home received %q", got)
	}
	noLeak("connection", res.Header, body)

	// The upgrade response of a WebSocket carries no token either.
	conn, res, err := websocket.DefaultDialer.Dial("ws://"+gw.Addr+"/node/secret/ws", forged)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	noLeak("upgrade", res.Header, nil)
	e2eHello(t, conn, "secret")
	e2eEcho(t, conn, websocket.TextMessage, []byte("through a home with a relay token"))

	t.Run("Streaming", func(t *testing.T) {
		// The body masker (proxy/mask.go) must pass an event on at once
		// even when it is shorter than the token: the next one is an hour
		// away.
		ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/node/secret/sse?n=2&interval=1h", nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if ev := e2eReadEvent(t, bufio.NewReader(res.Body)); ev != "data: 1" {
			t.Errorf("first event %q, want data: 1", ev)
		}
	})
}

// e2eReadEvent reads one server-sent event (its lines up to the blank line).
func e2eReadEvent(t testing.TB, br *bufio.Reader) string {
	t.Helper()
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %q, %v", line, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return strings.Join(lines, "\n")
		}
		lines = append(lines, line)
	}
}

func e2eHello(t testing.TB, conn *websocket.Conn, target string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
	mt, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read hello: %v", err)
	}
	var hello struct{ Hello, Version string }
	if mt != websocket.TextMessage || json.Unmarshal(data, &hello) != nil || hello.Hello != target {
		t.Fatalf("hello frame: type %d %s, want a text frame naming %s", mt, data, target)
	}
}

func e2eEcho(t testing.TB, conn *websocket.Conn, mt int, msg []byte) {
	t.Helper()
	_ = conn.SetWriteDeadline(time.Now().Add(testbin.WaitLimit))
	if err := conn.WriteMessage(mt, msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
	gt, got, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if gt != mt || !bytes.Equal(got, msg) {
		t.Fatalf("echo: type %d, %d bytes; want type %d, %d bytes equal", gt, len(got), mt, len(msg))
	}
}

// TestCheckConfig runs `wakegate check-config` and `wakegate version`.
func TestCheckConfig(t *testing.T) {
	t.Parallel()
	bin := testbin.Build(t)
	dir := t.TempDir()
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("run %v: %v", args, err)
		return "", -1
	}
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	bad := write("bad.yaml", `listen: "nowhere"
log:
  format: xml
wake:
  warm_ttl: -1s
homes:
  - id: "Bad ID"
apps:
  - slug: x
    kind: gui
`)
	out, code := run("check-config", "--config", bad)
	if code != 1 {
		t.Errorf("bad config: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		bad + ":1: listen:",
		bad + ":3: log.format:",
		bad + ":5: wake.warm_ttl:",
		bad + ":7: homes[0].id:",
		bad + ":9: apps[0].upstream:",
		bad + ":10: apps[0].kind:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bad config: output lacks %q\n%s", want, out)
		}
	}

	unknown := write("unknown.yaml", "wake:\n  warm_tll: 1s\n")
	out, code = run("check-config", "--config", unknown)
	if code != 1 || !strings.Contains(out, unknown+":2: wake.warm_tll: unknown field") {
		t.Errorf("unknown key: exit %d\n%s", code, out)
	}

	good := write("good.yaml", `listen: "127.0.0.1:0"
homes:
  - id: alice
apps:
  - slug: site
    upstream: "http://127.0.0.1:1"
    strip_prefix: true
`)
	if out, code = run("check-config", "--config", good); code != 0 || !strings.Contains(out, "config ok") {
		t.Errorf("good config: exit %d\n%s", code, out)
	}
	if out, code = run("check-config"); code != 0 {
		t.Errorf("embedded config: exit %d\n%s", code, out)
	}
	if out, code = run("version"); code != 0 || !strings.HasPrefix(out, "wakegate ") {
		t.Errorf("version: exit %d %q", code, out)
	}
}

// e2eGateway is a gateway running in the test process.
type e2eGateway struct {
	g      *gateway.Gateway
	addr   string
	data   string
	cancel context.CancelFunc
	served chan struct{} // closed when Serve has returned
	err    error         // Serve's result, once served is closed
	logs   *testbin.LogBuffer
}

// e2eStartInProcess builds a gateway with gateway.New from the YAML in extra
// (homes, apps, wake and server settings), with its data under a temp dir
// and homes run by the real binary's demo-home, and serves it on a
// loopback listener. It is stopped when the test ends.
func e2eStartInProcess(t testing.TB, extra string) *e2eGateway {
	t.Helper()
	command := fmt.Sprintf("[%q, \"demo-home\", \"--addr\", \"127.0.0.1:{port}\", \"--target\", \"{target}\", \"--version\", \"{version}\"]",
		testbin.Build(t))
	return e2eStartWithCommand(t, command, extra)
}

// e2eStartWithCommand is e2eStartInProcess with command (a YAML list) as
// the exec provider's command.
func e2eStartWithCommand(t testing.TB, command, extra string) *e2eGateway {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	text := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nexec:\n  command: %s\n%s", data, command, extra)
	cfg, err := all.Load("inproc.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	level := slog.LevelInfo
	if _, bench := t.(*testing.B); bench {
		level = slog.LevelError
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
	g, err := gateway.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	return e2eServe(t, g, ln, data, logs)
}

// e2eServe serves g on ln until the test ends, then stops it, closes it and
// kills any home process left in data; the gateway's log is shown when the
// test failed.
func e2eServe(t testing.TB, g *gateway.Gateway, ln net.Listener, data string, logs *testbin.LogBuffer) *e2eGateway {
	ctx, cancel := context.WithCancel(context.Background())
	p := &e2eGateway{g: g, addr: ln.Addr().String(), data: data, cancel: cancel, served: make(chan struct{}), logs: logs}
	go func() {
		defer close(p.served)
		p.err = g.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.served:
			if p.err != nil {
				t.Errorf("Serve: %v", p.err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("Serve did not return")
		}
		g.Close()
		testbin.KillHomes(data)
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return p
}

// TestSessions watches the session count of a home from inside the
// gateway while real clients use it.
func TestSessions(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
server:
  drain_grace: 1s
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	sessions := gw.g.Sessions()
	count := func() int { return sessions.Count("demo") }

	t.Run("WebSocketClientCloses", func(t *testing.T) {
		conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/demo/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		e2eHello(t, conn, "demo")
		if n := count(); n != 1 {
			t.Fatalf("open WebSocket counts %d, want 1", n)
		}
		for i := range 3 {
			e2eEcho(t, conn, websocket.TextMessage, []byte("ping "+strconv.Itoa(i)))
			if n := count(); n != 1 {
				t.Fatalf("after echo %d: count %d, want 1", i, n)
			}
		}
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
		conn.Close()
		testbin.Eventually(t, "count 0 after the client closed", func() bool { return count() == 0 })
	})

	t.Run("WebSocketHomeCloses", func(t *testing.T) {
		conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/demo/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		e2eHello(t, conn, "demo")
		if n := count(); n != 1 {
			t.Fatalf("open WebSocket counts %d, want 1", n)
		}
		// A frame header announcing a message past the home's read limit
		// (16 MiB) makes the home close the connection by itself.
		hdr := []byte{0x82, 0x80 | 127, 0, 0, 0, 0, 0x02, 0, 0, 0, 1, 2, 3, 4}
		if _, err := conn.UnderlyingConn().Write(hdr); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		_, _, err = conn.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
			t.Errorf("read after the oversized frame: %v, want the home's close 1009", err)
		}
		testbin.Eventually(t, "count 0 after the home closed", func() bool { return count() == 0 })
	})

	t.Run("ConcurrentRequests", func(t *testing.T) {
		const n = 100
		c := e2eClient(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.addr+"/node/demo/slow?d=1h", nil)
				res, err := c.Do(req)
				if err == nil {
					res.Body.Close()
					err = fmt.Errorf("slow request answered %d before it was cancelled", res.StatusCode)
				}
				if !errors.Is(err, context.Canceled) {
					errs <- err
				}
			}()
		}
		testbin.Eventually(t, "100 sessions in flight", func() bool { return count() >= n })
		if got := count(); got != n {
			t.Errorf("%d requests in flight count %d", n, got)
		}
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		testbin.Eventually(t, "count 0 after the requests ended", func() bool { return count() == 0 })
	})
}
