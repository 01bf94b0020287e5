package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/h1test"
)

// rateOptions are test options with the minimum rates on: 100 bytes per
// second after 300ms.
func rateOptions() Options {
	o := testOptions()
	o.MinBodyRate, o.MinResponseRate, o.MinRateGrace = 100, 100, 300*time.Millisecond
	return o
}

// TestSlowBodyIsCut sends a request body at one byte per 100ms (10 bytes
// per second against a floor of 100) on a raw connection: the proxy
// answers 408 body_too_slow and closes the connection while the client
// still has bytes to send, and the failure is the client's: the route's
// OnFailure (which drops a home's verdict) is not called. A body sent at
// once, on the same proxy, goes through.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	var failures atomic.Int32
	s, _ := front(t, rateOptions(), func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"), OnFailure: func() { failures.Add(1) }}
	})
	addr := s.Listener.Addr().String()

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	const size = 1000
	if _, err := fmt.Fprintf(c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *http.Response, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			close(answered)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		answered <- res
	}()
	sent := 0
	var res *http.Response
trickle:
	for sent < size {
		select {
		case res = <-answered:
			break trickle
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := c.Write([]byte{'x'}); err != nil {
			res = <-answered
			break
		}
		sent++
	}
	if res == nil {
		t.Fatalf("no answer after %d of %d body bytes", sent, size)
	}
	if res.StatusCode != http.StatusRequestTimeout || !res.Close {
		t.Errorf("slow body: %d (close %v), want 408 and the connection closed", res.StatusCode, res.Close)
	}
	if sent >= size {
		t.Errorf("the whole body was sent (%d bytes) before the cut", sent)
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("OnFailure called %d times for a client's slow body", n)
	}
	t.Logf("cut after %d body bytes", sent)

	res2, body := do(t, newReq(t, http.MethodPost, "http://"+addr+"/fast", strings.NewReader(strings.Repeat("y", size))))
	if res2.StatusCode != http.StatusOK || body != "ok" {
		t.Errorf("fast body: %d %q", res2.StatusCode, body)
	}
	if got := up.last(t).Body; len(got) != size {
		t.Errorf("upstream got %d body bytes of the fast request, want %d", len(got), size)
	}
}

// TestSlowReaderIsCut has a client ask for a large response and read
// nothing: once a write cannot be taken within the grace plus its size
// at 1MiB per second, the proxy gives up and its handler returns,
// while the client has read nothing.
func TestSlowReaderIsCut(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, sizedAnswer(64<<20))
	o := rateOptions()
	o.MinResponseRate = 1 << 20 // each 32KiB write of the copy gets the grace and 36ms
	p := New(o)
	t.Cleanup(p.Close)
	served := make(chan struct{})
	s := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		p.Serve(w, r, &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "/")})
	}))
	c, err := net.Dial("tcp", s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy still writes to a client that reads nothing")
	}
}

// TestSlowTLSReaderIsCutOnTheLoop is TestSlowReaderIsCut over TLS behind
// the HTTP/1.1 loop: the answer's head goes out as a block through the
// rate writer (the loop keeps no floor on TLS itself), and the body's
// writes still come under the floor's deadlines, so a client that reads
// nothing is cut.
func TestSlowTLSReaderIsCutOnTheLoop(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, sizedAnswer(64<<20))
	o := rateOptions()
	o.MinResponseRate = 1 << 20
	p := New(o)
	t.Cleanup(p.Close)
	served := make(chan struct{})
	certs, conf := testTLS(t)
	s := h1test.ServeTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		p.Serve(w, r, &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "/")})
	}), conf)
	d := &net.Dialer{Control: smallReadBuffer}
	c, err := tls.DialWithDialer(d, "tcp", s, &tls.Config{RootCAs: certs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy still writes to a TLS client that reads nothing")
	}
	if n := p.blocked.Load(); n != 1 {
		t.Errorf("%d heads sent as blocks, want 1: the rate writer passes them on", n)
	}
}

// sizedAnswer answers size bytes with their Content-Length, 64 KiB a
// write, until a write fails.
func sizedAnswer(size int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		buf := make([]byte, 64<<10)
		for n := 0; n < size; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}
}

// newLoopbackServer serves h on a loopback port until the test ends and
// returns its address.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestSlowReaderCutWithinSeconds serves an 8MiB response through the
// wakegate loop (h1serve) at the default floor, 240 bytes per second,
// with a 2s grace, on the splice path (a known length) and the copy path
// (none), to a client that reads nothing, one that reads at half the
// floor, and one at four times the floor. The first two are cut within
// the grace and 8s, whatever the size of the body (a floor kept per 32KiB
// write, or per 64KiB splice, let them hold on for minutes); the last
// reads on for 10s and is not cut.
func TestSlowReaderCutWithinSeconds(t *testing.T) {
	t.Parallel()
	const (
		size  = 8 << 20
		floor = 240
		grace = 2 * time.Second
	)
	for _, path := range []struct {
		name   string
		length bool
	}{{"splice", true}, {"copy", false}} {
		for _, rd := range []struct {
			name string
			rate int // bytes per second the client reads
			cut  bool
		}{{"stalled", 0, true}, {"half", floor / 2, true}, {"above", 4 * floor, false}} {
			t.Run(path.name+"/"+rd.name, func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					if path.length {
						w.Header().Set("Content-Length", fmt.Sprint(size))
					}
					buf := make([]byte, 64<<10)
					for n := 0; n < size; n += len(buf) {
						if _, err := w.Write(buf); err != nil {
							return
						}
					}
				})
				o := testOptions()
				o.MinResponseRate, o.MinRateGrace = floor, grace
				p := New(o)
				t.Cleanup(p.Close)
				served := make(chan struct{})
				s := h1test.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					defer close(served)
					p.Serve(w, r, &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t, "/")})
				}))
				d := net.Dialer{Control: smallReadBuffer}
				conn, err := d.Dial("tcp", s)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				start := time.Now()
				if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				bound := grace + 8*time.Second
				watch := bound + 2*time.Second // how long a client that must not be cut reads
				if !rd.cut {
					watch = 10 * time.Second
				}
				// Every 100ms, read a tenth of a second's worth at the
				// client's rate.
				buf := make([]byte, rd.rate/10)
				got := 0
				for time.Since(start) < watch {
					select {
					case <-served:
						took := time.Since(start)
						if !rd.cut {
							t.Fatalf("a client reading at %dB/s, above the floor of %dB/s, cut after %s (%d bytes read)",
								rd.rate, floor, took.Round(time.Millisecond), got)
						}
						if took > bound {
							t.Fatalf("cut after %s; want within %s", took.Round(time.Millisecond), bound)
						}
						t.Logf("cut after %s, %d bytes read", took.Round(time.Millisecond), got)
						return
					case <-time.After(100 * time.Millisecond):
					}
					if len(buf) > 0 {
						_ = conn.SetReadDeadline(time.Now().Add(time.Second))
						n, _ := io.ReadFull(conn, buf)
						got += n
					}
				}
				if rd.cut {
					t.Fatalf("a client reading at %dB/s, below the floor of %dB/s, not cut in %s", rd.rate, floor, watch)
				}
				t.Logf("not cut after %s, %d bytes read", time.Since(start).Round(time.Millisecond), got)
			})
		}
	}
}

// smallReadBuffer gives a client socket a small receive buffer (before it
// connects, so the window stays small), so that what the kernels hold
// for a client that reads slowly is little.
func smallReadBuffer(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<10)
	})
	if err != nil {
		return err
	}
	return serr
}
