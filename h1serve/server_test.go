package h1serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestClientGoneCancelsRequest: a request that runs while its client
// closes the connection sees its context end, with errClientGone as the
// cause.
func TestClientGoneCancelsRequest(t *testing.T) {
	started := make(chan struct{})
	cause := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			cause <- context.Cause(r.Context())
		case <-time.After(20 * time.Second):
			cause <- errors.New("the request was never cancelled")
		}
	})
	_, addr := startFast(t, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started
	_ = c.Close()
	if err := <-cause; !errors.Is(err, errClientGone) {
		t.Fatalf("cause = %v, want %v", err, errClientGone)
	}
}

// TestPipelinedDuringWatch: a second request sent while the first one is
// watched (it has run for more than a watch tick) is kept and answered.
func TestPipelinedDuringWatch(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * watchTick)
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	s, addr := startFast(t, h)
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Once the watch has started, the next bytes go to it.
	testbin.Eventually(t, "the watch on the slow request", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.conns {
			if c.st.Load()&watching != 0 {
				return true
			}
		}
		return false
	})
	if _, err := io.WriteString(c, "GET /next HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, want := range []string{"/slow", "/next"} {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		if string(b) != want {
			t.Fatalf("body %q, want %q", b, want)
		}
	}
	if st := s.Stats(); st.Requests != 2 || st.HandedOff != 0 {
		t.Fatalf("stats %+v, want 2 requests here, none handed off", st)
	}
}

// TestUpgradeGoesToNetHTTP: an upgrade is handed off, and net/http's
// hijack works on the handed-off connection, with the bytes sent behind
// the request.
func TestUpgradeGoesToNetHTTP(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo " + line)
		_ = brw.Flush()
	})
	s, addr := startFast(t, h)
	c := dialRaw(t, addr)
	// A plain request first, then the upgrade with a line right behind it.
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nping\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if string(b) != "plain" {
		t.Fatalf("first body %q", b)
	}
	res, err = http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "echo ping\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
	if st := s.Stats(); st.Requests != 1 || st.HandedOff != 1 {
		t.Fatalf("stats %+v, want 1 request here and 1 connection handed off", st)
	}
}

// TestShutdownClosesIdleAndFinishesActive: Shutdown closes a connection
// that waits for a request, lets a running request finish with
// Connection: close, and returns once both are gone.
func TestShutdownClosesIdleAndFinishesActive(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	s, addr := startFast(t, h)
	idle := dialRaw(t, addr)
	ibr := bufio.NewReader(idle)
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	first, err := http.ReadResponse(ibr, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(first.Body)
	busy := dialRaw(t, addr)
	if _, err := io.WriteString(busy, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	// The idle connection is closed without an answer.
	if _, err := ibr.ReadByte(); err == nil {
		t.Fatal("the idle connection got a byte after Shutdown")
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request running", err)
	case <-time.After(2 * watchTick):
	}
	close(release)
	res, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Close {
		t.Error("the response during shutdown does not say Connection: close")
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
}

// TestLongHeadGoesToNetHTTP: a head longer than the reader is net/http's,
// which serves it within its own limit.
func TestLongHeadGoesToNetHTTP(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Header.Get("X-Long")[:3])
	})
	s, addr := startFast(t, h)
	c := dialRaw(t, addr)
	long := strings.Repeat("abc", 3000)
	if b := ask(t, c, "GET / HTTP/1.1\r\nHost: t\r\nX-Long: "+long+"\r\n\r\n"); b != "abc" {
		t.Fatalf("body %q", b)
	}
	if st := s.Stats(); st.HandedOff != 1 {
		t.Fatalf("stats %+v, want the connection handed off", st)
	}
}

// TestWatchComesAndGoes: requests that end around the moment their watch
// starts all get their answer (a watch that starts late must not hold the
// connection's reader).
func TestWatchComesAndGoes(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("d"))
		time.Sleep(d)
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := startFast(t, h)
	const conns, each = 20, 6
	errs := make(chan error, conns)
	for i := range conns {
		go func() {
			errs <- func() error {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				for j := range each {
					// around one and two ticks, where watches start
					d := watchTick + time.Duration((i*each+j)%9)*watchTick/8
					if _, err := io.WriteString(c, "GET /?d="+d.String()+" HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
						return err
					}
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						return err
					}
					if b, _ := io.ReadAll(res.Body); string(b) != "ok" {
						return errors.New("body " + string(b))
					}
				}
				return nil
			}()
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// failingListener fails its first n accepts the way a process out of
// descriptors does.
type failingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptErrorsAreRetried: accept failures that are not a closed
// listener (EMFILE) are waited out, and serving goes on.
func TestAcceptErrorsAreRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	fl.n.Store(3)
	var logged strings.Builder
	var mu sync.Mutex
	s := &Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ErrorLog: log.New(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logged.Write(p) }), "", 0),
	}
	_ = s.Handoff(ln.Addr())
	done := make(chan error, 1)
	go func() { done <- s.Serve(fl) }()
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	c.CloseIdleConnections()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logged.String(), "too many open files"); n != 3 {
		t.Fatalf("%d accept failures logged, want 3:\n%s", n, logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// ask writes raw on c and returns the body of the one answer it reads.
func ask(t *testing.T, c net.Conn, raw string) string {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dialRaw opens a connection to addr for raw HTTP, closed when the test
// ends, every read and write bounded by 10 seconds.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// TestIdleTimeoutAfterRequests: a kept-alive connection is closed once it
// has waited the idle timeout for its next request, and not sooner,
// however its last request went: after a run of requests closer together
// than the slack (each keeps the deadline an earlier one left,
// idleDeadline), a request with a body, one watched while its handler
// ran.
func TestIdleTimeoutAfterRequests(t *testing.T) {
	const idle = 800 * time.Millisecond // a slack of 100ms
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * watchTick)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idle, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	for name, last := range map[string]string{
		"get":  "GET /a HTTP/1.1\r\nHost: t\r\n\r\n",
		"body": "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
		"slow": "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := dialRaw(t, ln.Addr().String())
			br := bufio.NewReader(c)
			ask := func(req string) {
				t.Helper()
				if _, err := io.WriteString(c, req); err != nil {
					t.Fatal(err)
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%q: %v", req, err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
			}
			// Ninety requests 10ms apart: 900ms in all, past the idle
			// timeout counted from the first; the last one right after.
			for range 90 {
				ask("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
				time.Sleep(10 * time.Millisecond)
			}
			ask("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
			ask(last)
			answered := time.Now()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("%v, want the server's close (EOF) within 5s", err)
			}
			if waited := time.Since(answered); waited < idle {
				t.Fatalf("closed %v after the answer, before the idle timeout of %v", waited, idle)
			}
		})
	}
}

// TestServes: Serves is true for the writer the loop gives a handler, and
// false for net/http's, which serves a connection the loop handed off.
func TestServes(t *testing.T) {
	seen := make(chan bool, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- Serves(w)
		_, _ = io.WriteString(w, "ok")
	})
	_, addr := startFast(t, h)
	c := dialRaw(t, addr)
	br := bufio.NewReader(c)
	// A plain request, then a chunked one, which the loop hands off.
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	if loop, std := <-seen, <-seen; !loop || std {
		t.Fatalf("Serves: %v on the loop, %v on net/http; want true, false", loop, std)
	}
}
