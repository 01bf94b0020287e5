//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// backend is a real net/http server on loopback that records the remote
// addresses it served and answers with what it saw.
type backend struct {
	mu      sync.Mutex
	remotes map[string]int
	srv     *http.Server
	addr    string
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{remotes: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/apps/", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.remotes[r.RemoteAddr]++
		b.mu.Unlock()
		if size := r.URL.Query().Get("size"); size != "" {
			n, _ := strconv.Atoi(size)
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write(pattern(n))
			return
		}
		body, _ := io.ReadAll(r.Body)
		out := fmt.Sprintf("%s %s xff=%q proto=%q conn=%q body=%d\n", r.Method, r.URL.RequestURI(),
			r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("Connection"), len(body))
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		_, _ = io.WriteString(w, out)
	})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = b.srv.Serve(ln) }()
	t.Cleanup(func() { _ = b.srv.Close(); <-done })
	return b
}

func (b *backend) conns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.remotes)
}

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

// runLoop starts the forwarder in front of b. stop ends Run and returns
// its error; it may be called more than once, and the test's end calls it.
func runLoop(t *testing.T, b *backend) (l *loop, stop func() error) {
	t.Helper()
	l, err := newLoop("127.0.0.1:0", b.addr, "/apps/")
	if err != nil {
		t.Fatal(err)
	}
	stop = testbin.Background(t, l.Run)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return l, stop
}

// startLoop runs the forwarder in front of b until the test ends.
func startLoop(t *testing.T, b *backend) string {
	t.Helper()
	l, _ := runLoop(t, b)
	return l.Addr()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func readAnswer(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	return string(body)
}

func TestForwardsWithTheHeadRewritten(t *testing.T) {
	b := startBackend(t)
	c := dial(t, startLoop(t, b))
	_, _ = io.WriteString(c, "GET /apps/x/a?q=1 HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
	got := readAnswer(t, bufio.NewReader(c))
	want := `GET /apps/x/a?q=1 xff="127.0.0.1" proto="http" conn="" body=0` + "\n"
	if got != want {
		t.Fatalf("backend saw %q, want %q", got, want)
	}
}

func TestKeepAliveReusesOneUpstream(t *testing.T) {
	b := startBackend(t)
	addr := startLoop(t, b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for i := range 100 {
		res, err := client.Get(fmt.Sprintf("http://%s/apps/x/%d", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !strings.HasPrefix(string(body), fmt.Sprintf("GET /apps/x/%d ", i)) {
			t.Fatalf("request %d answered %q", i, body)
		}
	}
	if n := b.conns(); n != 1 {
		t.Fatalf("100 sequential requests used %d upstream connections, want 1", n)
	}
}

func TestPipelinedRequestsAnswerInOrder(t *testing.T) {
	b := startBackend(t)
	c := dial(t, startLoop(t, b))
	var req bytes.Buffer
	for i := range 5 {
		fmt.Fprintf(&req, "POST /apps/p/%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", i, i*100, pattern(i*100))
	}
	_, _ = c.Write(req.Bytes())
	br := bufio.NewReader(c)
	for i := range 5 {
		got := readAnswer(t, br)
		if want := fmt.Sprintf("POST /apps/p/%d ", i); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, fmt.Sprintf("body=%d\n", i*100)) {
			t.Fatalf("answer %d is %q", i, got)
		}
	}
}

func TestLargeAnswerToASlowReader(t *testing.T) {
	b := startBackend(t)
	l, stop := runLoop(t, b)

	// A small receive window and an answer larger than every socket
	// buffer on the way, so the loop must hold the upstream back.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	c, err := d.Dial("tcp4", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	const size = 8 << 20
	_, _ = io.WriteString(c, fmt.Sprintf("GET /apps/big?size=%d HTTP/1.1\r\nHost: x\r\n\r\n", size))
	time.Sleep(200 * time.Millisecond)
	got := readAnswer(t, bufio.NewReaderSize(c, 512))
	if sha256.Sum256([]byte(got)) != sha256.Sum256(pattern(size)) {
		t.Fatalf("a %d-byte answer arrived as %d different bytes", size, len(got))
	}
	// The same connection carries the next request.
	_, _ = io.WriteString(c, "GET /apps/after HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := readAnswer(t, bufio.NewReader(c)); !strings.HasPrefix(got, "GET /apps/after ") {
		t.Fatalf("the request after the large answer got %q", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if l.outPeak == 0 || l.outPeak > upBufSize {
		t.Fatalf("the loop held at most %d bytes for the client; want some, and no more than one read (%d)", l.outPeak, upBufSize)
	}
}

func TestClosesAfterConnectionClose(t *testing.T) {
	b := startBackend(t)
	c := dial(t, startLoop(t, b))
	_, _ = io.WriteString(c, "GET /apps/x/1 HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\nGET /apps/x/2 HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || !strings.HasPrefix(string(body), "GET /apps/x/1 ") {
		t.Fatalf("the first request got %q, %v", body, err)
	}
	if !res.Close {
		t.Fatalf("the answer to Connection: close does not say it closes: %v", res.Header)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after an answer to Connection: close the client read %q, %v; want the connection closed", rest, err)
	}
}

func TestRefusesWhatItCannotForward(t *testing.T) {
	b := startBackend(t)
	addr := startLoop(t, b)
	for _, req := range []string{
		"GET /other HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /apps/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET /apps/x HTTP/1.1\r\nno colon here\r\n\r\n",
		"POST /apps/x HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
	} {
		c := dial(t, addr)
		_, _ = io.WriteString(c, req)
		n, err := c.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("%q: read %d bytes, %v; want the connection closed", req, n, err)
		}
	}
	if n := b.conns(); n != 0 {
		t.Fatalf("the backend was asked %d times, want none", n)
	}
}

func TestRunEndsWithItsContext(t *testing.T) {
	b := startBackend(t)
	l, stop := runLoop(t, b)
	c := dial(t, l.Addr())
	_, _ = io.WriteString(c, "GET /apps/x HTTP/1.1\r\nHost: x\r\n\r\n")
	readAnswer(t, bufio.NewReader(c))
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a client's connection after Run returned: %v, want EOF", err)
	}
	if _, err := net.Dial("tcp4", l.Addr()); err == nil {
		t.Fatal("the listener still accepts after Run returned")
	}
}
