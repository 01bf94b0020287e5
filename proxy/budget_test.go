package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestStalledBodyCutWithinWindow sends 30MiB of a 32MiB body at once on
// a raw connection through a route that reads bodies ahead (to a spool
// file), then stops: the minimum rate is kept over a sliding window, so
// the proxy answers 408 within the grace and the window, not after the
// time the 30MiB earned at the rate averaged over the whole body (about
// 87 hours at the 100 bytes per second of this test).
func TestStalledBodyCutWithinWindow(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := rateOptions()
	o.MinRateWindow = time.Second
	o.BodyBuffer, o.BodySpool, o.SpoolDir = 64<<10, 32<<20, t.TempDir()
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }}
	})
	c, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size, sent = 32 << 20, 30 << 20
	if _, err := fmt.Fprintf(c, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for n := 0; n < sent; n += len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	stalled := time.Now()
	// The grace (300ms) and the window (1s) with room for a loaded
	// machine; the old floor allowed hours.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer %v after the body stalled at %d of %d bytes: %v", time.Since(stalled), sent, size, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled body: %d; want 408", res.StatusCode)
	}
	t.Logf("cut %v after the stall", time.Since(stalled).Round(time.Millisecond))
	if n := len(up.seen()); n != 0 {
		t.Errorf("the upstream saw %d requests; want 0", n)
	}
}

// TestBodyBudgetPerClient has two clients of 127.0.0.1 start 1MiB
// uploads through a route that reads bodies ahead and stop half way,
// which holds 2MiB of that address's 2.5MiB budget; two more uploads from
// the same address then get 503 with Retry-After at once, while an upload
// from 127.0.0.2 goes through. The two first uploads, once finished,
// reach the upstream whole (a budget never touches what it admitted), and
// a body larger than the budget itself gets 413.
func TestBodyBudgetPerClient(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := testOptions()
	o.BodyBuffer, o.BodySpool, o.SpoolDir = 64<<10, 1<<20, t.TempDir()
	o.BodyBudgetClient, o.BodyBudgetTotal = 5<<19, 64<<20
	s, p := front(t, o, func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }}
	})
	addr := s.Listener.Addr().String()
	const size = 1 << 20
	body := pattern(size)
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	start := func(from string) net.Conn {
		c := dial(from)
		if _, err := fmt.Fprintf(c, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(body[:size/2]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var held []net.Conn
	for i := 1; i <= 2; i++ {
		held = append(held, start("127.0.0.1"))
		testbin.Eventually(t, fmt.Sprintf("upload %d admitted", i), func() bool { return p.BodyBudget().Used >= int64(i*size) })
	}
	for i := 3; i <= 4; i++ {
		c := start("127.0.0.1")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("upload %d past the budget: no answer: %v", i, err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Errorf("upload %d past the budget: %d, Retry-After %q; want 503 with Retry-After", i,
				res.StatusCode, res.Header.Get("Retry-After"))
		}
	}
	other := dial("127.0.0.2")
	if _, err := fmt.Fprintf(other, "PUT /other HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, body); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(other), nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("another client's upload: %v %v; want 200", res, err)
	}
	for i, c := range held {
		if _, err := c.Write(body[size/2:]); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("admitted upload %d: %v %v; want 200", i+1, res, err)
		}
	}
	whole := 0
	for _, r := range up.seen() {
		if bytes.Equal(r.Body, body) {
			whole++
		}
	}
	if whole != 3 {
		t.Errorf("%d uploads reached the upstream whole; want 3", whole)
	}
	if st := p.BodyBudget(); st.Used != 0 || st.Refused != 2 {
		t.Errorf("budget after: %+v; want nothing held and 2 refused", st)
	}

	big := dial("127.0.0.3")
	if _, err := fmt.Fprintf(big, "PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 4<<20); err != nil {
		t.Fatal(err)
	}
	// The budget holds what can be read ahead (1MiB and 64KiB) of a body
	// longer than that: it fits, and is forwarded as it comes.
	if _, err := big.Write(pattern(4 << 20)); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(big), nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("a body longer than the spool: %v %v; want 200", res, err)
	}
}

// TestBodyBudgetNeverFits: a body whose read-ahead is larger than the
// per-client budget itself gets 413.
func TestBodyBudgetNeverFits(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := testOptions()
	o.BodyBuffer, o.BodySpool, o.SpoolDir = 64<<10, 1<<20, t.TempDir()
	o.BodyBudgetClient = 512 << 10
	s, _ := front(t, o, func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }}
	})
	// The answer may come before the body is sent whole, and the
	// connection close after it: the body is written on the side, and
	// its write may fail once the answer is in.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	body := pattern(600 << 10)
	go func() {
		_, _ = fmt.Fprintf(conn, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		_, _ = conn.Write(body)
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the budget by itself: %v %v; want 413", res, err)
	}
	res, _ = do(t, newReq(t, http.MethodPut, s.URL+"/up", bytes.NewReader(pattern(100<<10))))
	if res.StatusCode != http.StatusOK {
		t.Errorf("a body within the budget: %d; want 200", res.StatusCode)
	}
}
