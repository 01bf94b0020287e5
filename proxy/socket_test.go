package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/endpoint"
)

// bigBody is what a Unix upstream answers at /big: long enough to splice.
var bigBody = bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16)

// newUnixUpstream is newUpstream on a Unix socket, with a WebSocket echo
// at /ws; its URL is the socket's stand-in (internal/endpoint).
func newUnixUpstream(t *testing.T) (*upstream, *url.URL) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "home.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := upgrader.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				mt, msg, err := c.ReadMessage()
				if err != nil || c.WriteMessage(mt, msg) != nil {
					return
				}
			}
		}
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(len(bigBody)))
			_, _ = w.Write(bigBody)
			return
		}
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, Host: r.Host, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	_ = u.Listener.Close()
	u.Listener = countingListener{Listener: ln, n: &u.conns}
	u.Start()
	t.Cleanup(u.Close)
	target, err := url.Parse(endpoint.HTTP("unix://" + sock))
	if err != nil {
		t.Fatal(err)
	}
	return u, target
}

// TestForwardToUnixSocket forwards plain requests (the upstream
// forwarder, whose pool reuses the socket connection), a request through
// ReverseProxy (Expect: 100-continue) and a WebSocket to a home on a Unix
// socket, which sees Host: localhost when its rule is the upstream's
// address.
func TestForwardToUnixSocket(t *testing.T) {
	for _, direct := range []bool{true, false} {
		name := "reverseproxy"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			up, target := newUnixUpstream(t)
			o := testOptions()
			o.Host.Default = HostUpstream
			p := New(o)
			p.noDirect = !direct
			t.Cleanup(p.Close)
			// bigServed has the long answer's handler return: the client
			// can hold the whole body before the splice is counted.
			bigServed := make(chan struct{}, 1)
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				route := &forward.Route{Kind: "home", Name: "h1", HomeID: "h1", Upstream: target, StripPrefix: "/node/h1", RelayToken: testToken}
				if r.URL.Path == "/node/h1/big" {
					route.RelayToken = "" // a token to mask would make the body copied
					defer func() { bigServed <- struct{}{} }()
				}
				p.Serve(w, r, route)
			}))
			t.Cleanup(s.Close)

			for i := range 2 {
				res, body := do(t, newReq(t, http.MethodGet, s.URL+"/node/h1/x?i=1", nil))
				if res.StatusCode != 200 || body != "ok" {
					t.Fatalf("GET %d: %d %q", i, res.StatusCode, body)
				}
			}
			payload := bytes.Repeat([]byte("b"), 300<<10)
			res, body := do(t, newReq(t, http.MethodPost, s.URL+"/node/h1/post", bytes.NewReader(payload)))
			if res.StatusCode != 200 || body != "ok" {
				t.Fatalf("POST: %d %q", res.StatusCode, body)
			}
			req := newReq(t, http.MethodPost, s.URL+"/node/h1/expect", strings.NewReader("with expect"))
			req.Header.Set("Expect", "100-continue")
			if res, body := do(t, req); res.StatusCode != 200 || body != "ok" {
				t.Fatalf("POST with Expect: %d %q", res.StatusCode, body)
			}
			seen := up.seen()
			if len(seen) != 4 {
				t.Fatalf("the home saw %d requests, want 4", len(seen))
			}
			for _, r := range seen {
				if r.Host != "localhost" || r.Header.Get("X-Wakegate-Relay") != testToken {
					t.Errorf("%s %s: Host %q, relay %q; want localhost and the token", r.Method, r.URI, r.Host, r.Header.Get("X-Wakegate-Relay"))
				}
			}
			if !bytes.Equal(seen[2].Body, payload) || string(seen[3].Body) != "with expect" {
				t.Errorf("bodies: %d bytes, %q", len(seen[2].Body), seen[3].Body)
			}
			if direct && up.conns.Load() > 2 {
				t.Errorf("%d connections to the socket for 3 plain requests and one with Expect; the pool was not used", up.conns.Load())
			}

			// A long answer: spliced from the socket on the direct path.
			if res, body := do(t, newReq(t, http.MethodGet, s.URL+"/node/h1/big", nil)); res.StatusCode != 200 || body != string(bigBody) {
				t.Fatalf("GET big: %d, %d bytes", res.StatusCode, len(body))
			}
			select {
			case <-bigServed:
			case <-time.After(10 * time.Second):
				t.Fatal("the long answer's handler did not return")
			}
			if direct && p.spliced.Load() != 1 {
				t.Errorf("%d bodies spliced, want the long answer's", p.spliced.Load())
			}

			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.URL, "http")+"/node/h1/ws", nil)
			if err != nil {
				t.Fatalf("WebSocket through the proxy: %v", err)
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if err := c.WriteMessage(websocket.BinaryMessage, payload[:70000]); err != nil {
				t.Fatal(err)
			}
			mt, got, err := c.ReadMessage()
			if err != nil || mt != websocket.BinaryMessage || len(got) != 70000 {
				t.Fatalf("echo: type %d, %d bytes, %v", mt, len(got), err)
			}
		})
	}
}

// BenchmarkWarmGetSocket is BenchmarkWarmGet (no relay token) to a home
// on a Unix socket.
func BenchmarkWarmGetSocket(b *testing.B) {
	for _, size := range []int{1 << 10, 256 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			body := pattern(size)
			sock := filepath.Join(b.TempDir(), "home.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				b.Fatal(err)
			}
			up := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			})}
			go func() { _ = up.Serve(ln) }()
			b.Cleanup(func() { _ = up.Close() })
			o := testOptions()
			o.MinBodyRate, o.MinResponseRate, o.MinRateGrace = 240, 240, 5*time.Second
			p := New(o)
			b.Cleanup(p.Close)
			u, err := url.Parse(endpoint.HTTP("unix://" + sock))
			if err != nil {
				b.Fatal(err)
			}
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p.Serve(w, r, &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: u})
			}))
			b.Cleanup(s.Close)
			client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1}}
			b.Cleanup(client.CloseIdleConnections)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				res, err := client.Get(s.URL + "/x")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil || n != int64(size) {
					b.Fatalf("%d bytes, %v", n, err)
				}
			}
		})
	}
}
