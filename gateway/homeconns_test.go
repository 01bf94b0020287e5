package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/route"
)

// heldUpstream is a real HTTP server on loopback standing for a home. It
// answers /healthz at once (the wake's probe) and holds every other
// request until release is closed, counting the requests in flight (and
// the most seen at once) and the connections that carried one.
type heldUpstream struct {
	addr     string
	release  chan struct{}
	inflight atomic.Int64
	most     atomic.Int64
	conns    atomic.Int64
	served   atomic.Int64
	once     sync.Once
}

type heldConnKey struct{}

// heldConn marks a connection once it has carried a held request.
type heldConn struct {
	net.Conn
	counted atomic.Bool
}

func newHeldUpstream(t *testing.T) *heldUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &heldUpstream{addr: ln.Addr().String(), release: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(u.serve), ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, heldConnKey{}, c) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(heldListener{ln})
	}()
	t.Cleanup(func() {
		u.open()
		_ = srv.Close()
		<-done
	})
	return u
}

// heldListener wraps each accepted connection so that it can be counted.
type heldListener struct{ net.Listener }

func (l heldListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c}, nil
}

func (u *heldUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		return
	}
	if c, ok := r.Context().Value(heldConnKey{}).(*heldConn); ok && c.counted.CompareAndSwap(false, true) {
		u.conns.Add(1)
	}
	n := u.inflight.Add(1)
	for {
		m := u.most.Load()
		if n <= m || u.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-u.release:
	case <-r.Context().Done():
	}
	u.inflight.Add(-1)
	u.served.Add(1)
	_, _ = io.WriteString(w, "held")
}

// open lets every held request go.
func (u *heldUpstream) open() { u.once.Do(func() { close(u.release) }) }

// homeConnsGateway serves a static home in front of u with a cap of
// maxConns requests per home and the wake timeout wakeTimeout, and warms
// it with one request.
func homeConnsGateway(t *testing.T, u *heldUpstream, maxConns int, wakeTimeout string) *admGateway {
	t.Helper()
	gw := admStart(t, fmt.Sprintf(`
server: {max_conns_per_client: 10000}
wake:
  warm_ttl: 10m
  idle_timeout: 0s
  wake_timeout: %s
  probe: {kind: http, path: /healthz}
proxy:
  max_conns_per_home: %d
homes:
  - id: h
    provider: static
    endpoint: "http://%s"
`, wakeTimeout, maxConns, u.addr), "")
	if _, err := gw.g.Engine().EnsureAwake(context.Background(), "h"); err != nil {
		t.Fatalf("wake: %v", err)
	}
	return gw
}

// TestHomeConnsBurstReusesConnections sends a burst of 64 concurrent
// requests, each on its own client connection, to one home with a cap of
// 4: while every request has reached the gateway, the home holds no more
// than 4 of them, and once it answers all 64 succeed over no more than 4
// upstream connections.
func TestHomeConnsBurstReusesConnections(t *testing.T) {
	t.Parallel()
	const n, max = 64, 4
	u := newHeldUpstream(t)
	gw := homeConnsGateway(t, u, max, "1m")

	codes := make(chan int, n)
	for range n {
		go func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
			res, err := c.Get("http://" + gw.addr + "/node/h/burst")
			if err != nil {
				codes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			codes <- res.StatusCode
		}()
	}
	// Every request is inside the gateway (counted as a session of the
	// home) and the home holds as many as the cap lets through.
	// Every request past the cap waits for a slot, and the home holds as
	// many as the cap lets through.
	testbin.Eventually(t, "the requests past the cap waiting and exactly the cap held at the home", func() bool {
		return admValue(gw.scrape(t), "wakegate_home_conn_waits_total", nil) == n-max && u.inflight.Load() == max
	})
	u.open()
	for range n {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("a request of the burst got %d; want 200", code)
		}
	}
	if m := u.most.Load(); m > max {
		t.Fatalf("the home held %d requests at once; want at most the cap, %d", m, max)
	}
	if c := u.conns.Load(); c > max {
		t.Fatalf("the burst used %d upstream connections; want at most the cap, %d", c, max)
	}
	if s := u.served.Load(); s != n {
		t.Fatalf("the home served %d requests; want %d", s, n)
	}
	if r := admValue(gw.scrape(t), "wakegate_home_conn_refused_total", nil); r != 0 {
		t.Fatalf("wakegate_home_conn_refused_total = %v; want 0", r)
	}
}

// TestHomeConnsQueuedCallerGetsAnAnswer fills the only slot of a home
// (cap 1) with a request the home holds: a request queued behind it gets
// 503 home_at_capacity with Retry-After and the public error shape once
// the wake timeout has passed, a queued request whose caller goes away
// leaves the queue, and a WebSocket upgrade is not queued at all.
func TestHomeConnsQueuedCallerGetsAnAnswer(t *testing.T) {
	t.Parallel()
	u := newHeldUpstream(t)
	gw := homeConnsGateway(t, u, 1, "1s")
	base := "http://" + gw.addr + "/node/h/"

	first := make(chan int, 1)
	go func() {
		res, err := http.Get(base + "first")
		if err != nil {
			first <- 0
			return
		}
		res.Body.Close()
		first <- res.StatusCode
	}()
	testbin.Eventually(t, "the first request held by the home", func() bool { return u.inflight.Load() == 1 })

	// A caller that goes away while queued leaves the queue: its session
	// ends, the first one's stays.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"gone", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		gone <- err
	}()
	testbin.Eventually(t, "the second request queued", func() bool { return gw.g.Sessions().Count("h") == 2 })
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the request whose caller went away was answered")
	}
	testbin.Eventually(t, "the gone caller's session ended", func() bool { return gw.g.Sessions().Count("h") == 1 })

	// A queued caller that stays gets 503 home_at_capacity at the wake
	// timeout.
	res, err := http.Get(base + "queued")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Code, Message, RequestID string } `json:"error"`
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("queued request: %d %s: %v", res.StatusCode, raw, err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || body.Error.Code != route.CodeHomeAtCapacity ||
		res.Header.Get("Retry-After") == "" || body.Error.Message == "" || strings.Contains(string(raw), "max_conns_per_home") {
		t.Fatalf("queued request: %d Retry-After %q %s; want 503 %s with Retry-After and no config detail",
			res.StatusCode, res.Header.Get("Retry-After"), raw, route.CodeHomeAtCapacity)
	}
	if u.served.Load() != 0 || u.inflight.Load() != 1 {
		t.Fatalf("the home saw %d served and %d in flight; want only the first, held", u.served.Load(), u.inflight.Load())
	}
	fams := gw.scrape(t)
	if w, r := admValue(fams, "wakegate_home_conn_waits_total", nil), admValue(fams, "wakegate_home_conn_refused_total", nil); w != 2 || r != 2 {
		t.Fatalf("waits %v, refused %v; want 2 and 2 (the caller gone, the one at the wake timeout)", w, r)
	}

	// An upgrade takes no slot: it reaches the home beside the first.
	upgraded := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"ws", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			upgraded <- 0
			return
		}
		res.Body.Close()
		upgraded <- res.StatusCode
	}()
	testbin.Eventually(t, "the upgrade at the home beside the first request", func() bool { return u.inflight.Load() == 2 })

	u.open()
	if code := <-upgraded; code != http.StatusOK {
		t.Fatalf("the upgrade the home refused got %d; want its 200 relayed", code)
	}
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the first request got %d; want 200", code)
	}
}
