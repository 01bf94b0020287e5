package gateway_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
)

// Hostile traffic through the real gateway: upstreams that answer before
// reading the request body (and close, drain or hold the connection),
// answer late, send bytes after an answer, close mid-body or flood 1xx;
// clients that pipeline, trickle, abandon requests and split their bytes.
// Every request carries an id of its own (X-Soak-Id) that the upstream
// records and echoes: no request may be lost, reach the upstream twice,
// or be answered with another request's answer.

// hostileUpstream is a raw HTTP/1.1 server on loopback whose behaviour is
// chosen by the request path (after the app's prefix is stripped).
type hostileUpstream struct {
	ln   net.Listener
	addr string
	wg   sync.WaitGroup

	mu    sync.Mutex
	seen  map[string]int // X-Soak-Id -> times received
	conns map[net.Conn]struct{}
	early atomic.Int64 // answers sent before the request body was read
}

func newHostileUpstream(t testing.TB) *hostileUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &hostileUpstream{ln: ln, addr: ln.Addr().String(), seen: map[string]int{}, conns: map[net.Conn]struct{}{}}
	u.wg.Go(u.accept)
	t.Cleanup(u.close)
	return u
}

func (u *hostileUpstream) accept() {
	for {
		c, err := u.ln.Accept()
		if err != nil {
			return
		}
		u.mu.Lock()
		u.conns[c] = struct{}{}
		u.mu.Unlock()
		u.wg.Go(func() {
			defer func() {
				u.mu.Lock()
				delete(u.conns, c)
				u.mu.Unlock()
				_ = c.Close()
			}()
			u.serve(c)
		})
	}
}

func (u *hostileUpstream) close() {
	_ = u.ln.Close()
	u.mu.Lock()
	for c := range u.conns {
		_ = c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// count is how many distinct ids the upstream received.
func (u *hostileUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

// duplicates lists the ids received more than once.
func (u *hostileUpstream) duplicates() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var d []string
	for id, n := range u.seen {
		if n > 1 {
			d = append(d, fmt.Sprintf("%s x%d", id, n))
		}
	}
	return d
}

// hostileAnswer is the body every answer of the hostile upstream carries.
func hostileAnswer(id string, n int64) string { return fmt.Sprintf("id=%s len=%d", id, n) }

func writeAnswer(w io.Writer, status int, id, body, extra string) error {
	_, err := fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nX-Soak-Id: %s\r\nContent-Length: %d\r\n%s\r\n%s",
		status, http.StatusText(status), id, len(body), extra, body)
	return err
}

// serve answers the requests of one connection. A request's path picks
// the behaviour:
//
//	/echo         read the body, answer 200 with the id and the body's length
//	/late         the same, 300 ms later
//	/extra        the same, with a stray response after it in the same write
//	/cut          announce 1000 bytes, send 10 and close
//	/hints        50 x 103 Early Hints, then the answer
//	/early-close  answer 401 before reading the body, then close
//	/early-drain  answer 401 before reading the body, then read it and go on
//	/early-hold   answer 401, wait 500 ms without reading, then read the body and go on
//
// Anything else (the app's health check) is answered 200 "ok".
func (u *hostileUpstream) serve(c net.Conn) {
	br := bufio.NewReaderSize(c, 16<<10)
	for {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		id := req.Header.Get("X-Soak-Id")
		if id != "" {
			u.mu.Lock()
			u.seen[id]++
			u.mu.Unlock()
		}
		drain := func() int64 {
			n, _ := io.Copy(io.Discard, req.Body)
			return n
		}
		switch req.URL.Path {
		case "/echo", "/late", "/extra", "/hints":
			n := drain()
			if req.URL.Path == "/late" {
				time.Sleep(300 * time.Millisecond)
			}
			if req.URL.Path == "/hints" {
				for range 50 {
					if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"); err != nil {
						return
					}
				}
			}
			var out strings.Builder
			_ = writeAnswer(&out, http.StatusOK, id, hostileAnswer(id, n), "")
			if req.URL.Path == "/extra" {
				_ = writeAnswer(&out, http.StatusOK, "stray", hostileAnswer("stray", 0), "")
			}
			if _, err := io.WriteString(c, out.String()); err != nil {
				return
			}
		case "/cut":
			drain()
			_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-Soak-Id: %s\r\nContent-Length: 1000\r\n\r\nonly ten b", id)
			return
		case "/early-close", "/early-drain", "/early-hold":
			u.early.Add(1)
			extra := ""
			if req.URL.Path == "/early-close" {
				extra = "Connection: close\r\n"
			}
			if err := writeAnswer(c, http.StatusUnauthorized, id, hostileAnswer(id, -1), extra); err != nil {
				return
			}
			switch req.URL.Path {
			case "/early-close":
				return
			case "/early-hold":
				time.Sleep(500 * time.Millisecond)
			}
			drain()
		default:
			drain()
			if err := writeAnswer(c, http.StatusOK, "", "ok", ""); err != nil {
				return
			}
		}
	}
}

// soakWire is how the hostile clients reach a gateway: plain TCP, or TLS
// to its HTTPS listener for the name soak.test, trusted through the
// gateway's internal CA.
type soakWire struct {
	addr string
	tls  *tls.Config // nil: plain TCP
}

// dial opens a connection to the gateway, its handshake done.
func (w soakWire) dial() (net.Conn, error) {
	if w.tls == nil {
		return net.Dial("tcp", w.addr)
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", w.addr, w.tls)
}

// url is path on the gateway, with the scheme of the wire.
func (w soakWire) url(path string) string {
	if w.tls == nil {
		return "http://" + w.addr + path
	}
	return "https://" + w.addr + path
}

// transport is an HTTP client transport to the gateway over the wire,
// HTTP/1.1 only.
func (w soakWire) transport(keepAlive bool) *http.Transport {
	tr := &http.Transport{MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 20 * time.Second, DisableKeepAlives: !keepAlive}
	if w.tls != nil {
		tr.TLSClientConfig = w.tls.Clone()
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return tr
}

// hostileGateway starts a gateway whose app "h" is the hostile upstream
// (prefix stripped), served by the given http1_server, on plain HTTP or
// (tlsOn) on HTTPS alone, and waits until the app is published.
func hostileGateway(t *testing.T, up *hostileUpstream, http1 string, tlsOn bool) soakWire {
	t.Helper()
	conf := "server:\n  http1_server: " + http1 + "\napps:\n" +
		appEntry("h", "http://"+up.addr, "api", "    strip_prefix: true\n    health: {path: /health, interval: 50ms}\n")
	if tlsOn {
		conf += "tls:\n  mode: internal\n  names: [soak.test]\n  http_listen: \"\"\n"
	}
	gw := startAppGateway(t, conf)
	gw.waitReason(t, "h", appstatus.ReasonReady)
	w := soakWire{addr: strings.TrimPrefix(gw.base, "http://")}
	if tlsOn {
		pemRoot, err := os.ReadFile(filepath.Join(gw.data, "internal-ca", "root.crt"))
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pemRoot)
		w.tls = &tls.Config{ServerName: "soak.test", RootCAs: roots}
		waitCert(t, w.addr, "soak.test", roots)
	}
	return w
}

// soakTally counts what the clients did and what went wrong.
type soakTally struct {
	requests, answered, ids atomic.Int64
	earlyPosts              atomic.Int64
	mu                      sync.Mutex
	problems, notes         []string
}

func (s *soakTally) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 50 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// note records something slow that is not a failure.
func (s *soakTally) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.notes) < 20 {
		s.notes = append(s.notes, fmt.Sprintf(format, args...))
	}
}

func (s *soakTally) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.problems) > 0
}

func (s *soakTally) report(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.problems {
		t.Error(p)
	}
	for _, n := range s.notes {
		t.Log(n)
	}
}

// soakIDs hands out unique request ids.
type soakIDs struct{ n atomic.Int64 }

func (s *soakIDs) next(kind string) string {
	return kind + "-" + strconv.FormatInt(s.n.Add(1), 10)
}

// checkAnswer checks that res answers the request id: its X-Soak-Id, and
// the body when whole is true.
func checkAnswer(tally *soakTally, res *http.Response, body []byte, id string, whole bool) {
	tally.answered.Add(1)
	got := res.Header.Get("X-Soak-Id")
	if got == "" {
		return // a gateway's own answer (502, 408): no upstream answer to mix up
	}
	tally.ids.Add(1)
	if got != id {
		tally.fail("request %s answered with %s's answer (%d)", id, got, res.StatusCode)
		return
	}
	if whole && !strings.HasPrefix(string(body), "id="+id+" ") {
		tally.fail("request %s answered with the body %q", id, body)
	}
}

// pipeliner sends batches of GETs on one keep-alive connection without
// waiting for the answers, until stop; each must come back, in order,
// with its own answer, and reach the upstream once.
func pipeliner(gw soakWire, ids *soakIDs, tally *soakTally, stop <-chan struct{}, batch int) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := gw.dial()
		if err != nil {
			tally.fail("pipeliner dial: %v", err)
			return
		}
		br := bufio.NewReader(c)
		for round := 0; round < 20; round++ {
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			sent := make([]string, batch)
			var out strings.Builder
			for i := range sent {
				sent[i] = ids.next("pipe")
				fmt.Fprintf(&out, "GET /apps/h/echo HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\n\r\n", sent[i])
			}
			tally.requests.Add(int64(batch))
			if _, err := io.WriteString(c, out.String()); err != nil {
				tally.fail("pipeliner write: %v", err)
				break
			}
			for i, id := range sent {
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					tally.fail("pipelined request %s (%d of %d) lost: %v", id, i+1, batch, err)
					break
				}
				body, err := io.ReadAll(res.Body)
				if err != nil {
					tally.fail("pipelined request %s: body: %v", id, err)
					break
				}
				checkAnswer(tally, res, body, id, true)
				if res.StatusCode != http.StatusOK {
					tally.fail("pipelined request %s: status %d %s", id, res.StatusCode, body)
				}
			}
			if tally.failed() {
				break
			}
		}
		_ = c.Close()
	}
}

// earlyPoster POSTs bodies of the given sizes, one connection after
// another, in 64 KiB writes, to a path whose upstream answers before it
// reads the body; it reads the answer while it writes.
func earlyPoster(gw soakWire, path string, sizes []int, ids *soakIDs, tally *soakTally, stop <-chan struct{}) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		size := sizes[n%len(sizes)]
		id := ids.next("early")
		tally.requests.Add(1)
		tally.earlyPosts.Add(1)
		c, err := gw.dial()
		if err != nil {
			tally.fail("early poster dial: %v", err)
			return
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := fmt.Fprintf(c, "POST /apps/h%s HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\nContent-Length: %d\r\n\r\n", path, id, size); err != nil {
				return
			}
			for left := size; left > 0; {
				k := min(left, len(chunk))
				if _, err := c.Write(chunk[:k]); err != nil {
					return // answered and closed before the whole body: allowed
				}
				left -= k
			}
		}()
		began := time.Now()
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if d := time.Since(began); d > 3*time.Second {
			tally.note("early POST %s (%d bytes) to %s: answered after %v", id, size, path, d)
		}
		if err != nil {
			tally.fail("early POST %s (%d bytes) to %s: no answer: %v", id, size, path, err)
		} else {
			body, _ := io.ReadAll(res.Body)
			checkAnswer(tally, res, body, id, res.StatusCode == http.StatusUnauthorized)
			switch res.StatusCode {
			case http.StatusUnauthorized, http.StatusBadGateway:
			default:
				tally.fail("early POST %s to %s: status %d %s", id, path, res.StatusCode, body)
			}
		}
		began = time.Now()
		<-done
		if d := time.Since(began); d > 3*time.Second {
			tally.note("early POST %s (%d bytes) to %s: the body's writes ended %v after the answer", id, size, path, d)
		}
		_ = c.Close()
	}
}

// TestEarlyAnswerNoCrossTalk: upstreams that answer POSTs before reading
// their bodies (and close, or drain and keep the connection), fed bodies
// from 5 KB to 20 MB one connection after another, while a pipelining
// client beside them sends GETs with ids of their own: the gateway stays
// up, and every GET is answered once, with its own answer, on both
// servers of the public listener.
func TestEarlyAnswerNoCrossTalk(t *testing.T) {
	if testing.Short() {
		t.Skip("traffic for seconds")
	}
	for _, http1 := range []string{"wakegate", "net/http"} {
		t.Run(strings.ReplaceAll(http1, "/", "-"), func(t *testing.T) {
			up := newHostileUpstream(t)
			gw := hostileGateway(t, up, http1, false)
			ids, tally := &soakIDs{}, &soakTally{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			sizes := []int{5 << 10, 64 << 10, 200 << 10, 1 << 20, 20 << 20}
			for _, path := range []string{"/early-close", "/early-drain"} {
				wg.Go(func() { earlyPoster(gw, path, sizes, ids, tally, stop) })
			}
			wg.Go(func() { pipeliner(gw, ids, tally, stop, 10) })
			time.Sleep(8 * time.Second)
			close(stop)
			wg.Wait()
			if d := up.duplicates(); len(d) > 0 {
				t.Errorf("requests received twice upstream: %v", d)
			}
			tally.report(t)
			t.Logf("%s: %d requests (%d early-answered POSTs), %d answered, %d ids checked",
				http1, tally.requests.Load(), tally.earlyPosts.Load(), tally.answered.Load(), tally.ids.Load())
		})
	}
}

// trickler POSTs small bodies to /echo in tiny writes with pauses, and
// sends some heads one byte at a time, each on a connection kept alive;
// every request must come back with its own answer.
func trickler(gw soakWire, ids *soakIDs, tally *soakTally, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := gw.dial()
		if err != nil {
			tally.fail("trickler dial: %v", err)
			return
		}
		br := bufio.NewReader(c)
		for round := 0; round < 5; round++ {
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			id := ids.next("trickle")
			tally.requests.Add(1)
			body := strings.Repeat("t", 1500+round)
			msg := fmt.Sprintf("POST /apps/h/echo HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\nContent-Length: %d\r\n\r\n%s", id, len(body), body)
			step := 1 + round*7 // heads and bodies split in 1 to 29 bytes
			for i := 0; i < len(msg); i += step {
				if _, err := io.WriteString(c, msg[i:min(i+step, len(msg))]); err != nil {
					tally.fail("trickled request %s: write: %v", id, err)
					_ = c.Close()
					return
				}
				if i%(step*40) == 0 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				tally.fail("trickled request %s lost: %v", id, err)
				break
			}
			got, err := io.ReadAll(res.Body)
			if err != nil {
				tally.fail("trickled request %s: body: %v", id, err)
				break
			}
			checkAnswer(tally, res, got, id, true)
			if want := hostileAnswer(id, int64(len(body))); res.StatusCode != http.StatusOK || string(got) != want {
				tally.fail("trickled request %s: %d %q, want 200 %q", id, res.StatusCode, got, want)
			}
		}
		_ = c.Close()
	}
}

// abandoner starts requests and leaves: a POST with part of its body, a
// head cut half way, a pipelined pair whose answers it never reads.
func abandoner(gw soakWire, ids *soakIDs, tally *soakTally, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		c, err := gw.dial()
		if err != nil {
			tally.fail("abandoner dial: %v", err)
			return
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		id := ids.next("gone")
		switch n % 3 {
		case 0:
			_, _ = fmt.Fprintf(c, "POST /apps/h/echo HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\nContent-Length: 50000\r\n\r\n%s", id, strings.Repeat("g", 2000))
		case 1:
			_, _ = fmt.Fprintf(c, "GET /apps/h/echo HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\n", id)
		case 2:
			_, _ = fmt.Fprintf(c, "GET /apps/h/late HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s\r\n\r\nGET /apps/h/echo HTTP/1.1\r\nHost: soak.test\r\nX-Soak-Id: %s-2\r\n\r\n", id, id)
		}
		time.Sleep(20 * time.Millisecond)
		_ = c.Close()
	}
}

// keepAliveClient sends requests one after another through a Go client's
// keep-alive pool to the upstreams that answer late, send stray bytes
// after an answer, cut a body or flood 1xx; each answer that comes from
// the upstream must be its own request's.
func keepAliveClient(gw soakWire, ids *soakIDs, tally *soakTally, stop <-chan struct{}) {
	tr := gw.transport(true)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	// A cut answer is aborted: the client may see no answer at all, and
	// Go's client sends an idempotent request again after that on a
	// reused connection. Each is sent once, on a connection of its own.
	once := &http.Client{Transport: gw.transport(false), Timeout: 20 * time.Second}
	paths := []string{"/late", "/extra", "/cut", "/hints", "/echo", "/extra"}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		path := paths[n%len(paths)]
		id := ids.next("ka" + strings.TrimPrefix(path, "/"))
		var body io.Reader
		method := http.MethodGet
		if n%2 == 1 {
			method, body = http.MethodPost, strings.NewReader(strings.Repeat("k", 3000))
		}
		req, err := http.NewRequest(method, gw.url("/apps/h"+path), body)
		if err != nil {
			tally.fail("request: %v", err)
			return
		}
		req.Host = "soak.test"
		req.Header.Set("X-Soak-Id", id)
		tally.requests.Add(1)
		client := c
		if path == "/cut" {
			client = once
		}
		res, err := client.Do(req)
		if err != nil {
			if path == "/cut" {
				tally.answered.Add(1) // aborted, as the upstream's answer was
				continue
			}
			tally.fail("keep-alive request %s to %s lost: %v", id, path, err)
			continue
		}
		got, rerr := io.ReadAll(res.Body)
		_ = res.Body.Close()
		switch {
		case path == "/cut":
			checkAnswer(tally, res, got, id, false)
			if rerr == nil {
				tally.fail("request %s: a body cut by the upstream came whole: %q", id, got)
			}
		case path == "/hints" && res.StatusCode == http.StatusBadGateway:
			checkAnswer(tally, res, got, id, false) // too many 1xx: the gateway's own 502
		case rerr != nil || res.StatusCode != http.StatusOK:
			tally.fail("keep-alive request %s to %s: %d %q %v", id, path, res.StatusCode, got, rerr)
		default:
			checkAnswer(tally, res, got, id, true)
		}
	}
}

// soakFor is how long TestAdversarialSoak runs on each server: 60 s, or
// the duration in WAKEGATE_SOAK (for longer runs by hand).
func soakFor(t *testing.T) time.Duration {
	v := os.Getenv("WAKEGATE_SOAK")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("WAKEGATE_SOAK=%q: want a positive duration such as 5m", v)
	}
	return d
}

// TestAdversarialSoak runs, for a minute (soakFor) on each server of the public
// listener (server.http1_server wakegate and net/http, and the wakegate
// loop over TLS), all the hostile upstreams and clients above at once,
// through the real gateway. It fails on any panic or race report (the
// gateway runs in the test process), and on any request lost, received
// twice upstream, or answered with another request's answer.
func TestAdversarialSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of traffic")
	}
	soak := soakFor(t)
	for _, run := range []struct {
		http1 string
		tls   bool
	}{{"wakegate", false}, {"net/http", false}, {"wakegate", true}} {
		http1 := run.http1
		name := strings.ReplaceAll(http1, "/", "-")
		if run.tls {
			name += "-tls"
		}
		t.Run(name, func(t *testing.T) {
			up := newHostileUpstream(t)
			gw := hostileGateway(t, up, http1, run.tls)
			ids, tally := &soakIDs{}, &soakTally{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			sizes := []int{5 << 10, 64 << 10, 200 << 10, 1 << 20, 4 << 20}
			for _, path := range []string{"/early-close", "/early-drain", "/early-hold"} {
				wg.Go(func() { earlyPoster(gw, path, sizes, ids, tally, stop) })
			}
			wg.Go(func() { pipeliner(gw, ids, tally, stop, 10) })
			wg.Go(func() { pipeliner(gw, ids, tally, stop, 3) })
			wg.Go(func() { trickler(gw, ids, tally, stop) })
			wg.Go(func() { abandoner(gw, ids, tally, stop) })
			wg.Go(func() { keepAliveClient(gw, ids, tally, stop) })
			wg.Go(func() { keepAliveClient(gw, ids, tally, stop) })
			time.Sleep(soak)
			close(stop)
			wg.Wait()
			if d := up.duplicates(); len(d) > 0 {
				t.Errorf("requests received twice upstream: %v", d)
			}
			tally.report(t)
			t.Logf("%s: %d requests, %d early-answered POSTs (%d answers sent early upstream), %d answered, %d ids checked, %d ids seen upstream",
				http1, tally.requests.Load(), tally.earlyPosts.Load(), up.early.Load(), tally.answered.Load(), tally.ids.Load(), up.count())
		})
	}
}

// TestCutBodyAbortsAsUnderNetHTTP: an upstream that announces more body
// than it sends is seen the same way behind the loop and behind net/http,
// on the direct path and on ReverseProxy's (a query with ';'): the client
// never takes the cut body for a whole one.
func TestCutBodyAbortsAsUnderNetHTTP(t *testing.T) {
	type seen struct {
		head   bool // a head reached the client
		status int
		whole  bool // the body came whole
	}
	get := func(t *testing.T, w soakWire, target string) seen {
		c, err := w.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: soak.test\r\n\r\n", target); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return seen{}
		}
		defer res.Body.Close()
		_, err = io.ReadAll(res.Body)
		return seen{head: true, status: res.StatusCode, whole: err == nil}
	}
	targets := []string{"/apps/h/cut", "/apps/h/cut?a;b"}
	got := map[string][]seen{}
	for _, http1 := range []string{"wakegate", "net/http"} {
		gw := hostileGateway(t, newHostileUpstream(t), http1, false)
		for _, target := range targets {
			s := get(t, gw, target)
			if s.whole {
				t.Errorf("%s, %s: a cut body came whole (%d)", http1, target, s.status)
			}
			got[target] = append(got[target], s)
		}
	}
	for _, target := range targets {
		if g := got[target]; g[0] != g[1] {
			t.Errorf("%s: behind the loop %+v, behind net/http %+v", target, g[0], g[1])
		}
	}
}
