package h1serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// startWorkers serves h on the loop alone, its serving goroutines waiting
// idle for a connection at most idle.
func startWorkers(t *testing.T, h http.Handler, idle time.Duration) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0), workerIdle: idle}
	std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: s.ErrorLog}
	hand := s.Handoff(ln.Addr())
	stdDone, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(stdDone); _ = std.Serve(hand) }()
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		_ = std.Close()
		<-done
		<-stdDone
	})
	return s, ln.Addr().String()
}

// goroutineID is the number the runtime gives the calling goroutine.
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b)) // "goroutine 42 [running]:"
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestIdleGoroutineServesTheNextConnection: connections that come one
// after another, each carrying one request, are all served on the
// goroutine that served the first, which waits for the next connection
// instead of ending.
func TestIdleGoroutineServesTheNextConnection(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, goroutineID())
	})
	s, addr := startWorkers(t, h, time.Hour)
	const n = 20
	seen := map[string]int{}
	for i := range n {
		c := dialRaw(t, addr)
		id := ask(t, c, "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		if id == "" {
			t.Fatalf("connection %d: no goroutine id", i)
		}
		seen[id]++
		_ = c.Close()
		testbin.Eventually(t, "the serving goroutine waiting for the next connection", func() bool {
			return s.Stats().IdleGoroutines == 1
		})
	}
	if st := s.Stats(); len(seen) != 1 || st.Goroutines != 1 || st.Requests != n {
		t.Fatalf("%d connections served on goroutines %v; stats %+v; want all on one", n, seen, st)
	}
}

// TestIdleGoroutinesAreBoundedAndEnd: after a burst of more connections at
// once than maxIdleWorkers, that many goroutines wait and the others end;
// Shutdown ends the wait of those, and a goroutine that waits in vain ends
// once its idle time is over.
func TestIdleGoroutinesAreBoundedAndEnd(t *testing.T) {
	release := make(chan struct{})
	var in atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.Add(1)
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	s, addr := startWorkers(t, h, time.Hour)
	n := maxIdleWorkers + 44
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		if _, err := io.WriteString(conns[i], "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	testbin.Eventually(t, fmt.Sprintf("%d requests in their handler", n), func() bool { return in.Load() == int32(n) })
	close(release)
	for i, c := range conns {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %v %v", i, res, err)
		}
		_ = res.Body.Close()
	}
	testbin.Eventually(t, "the bounded number of goroutines waiting", func() bool {
		return s.Stats().IdleGoroutines == maxIdleWorkers
	})
	if st := s.Stats(); st.Goroutines != int64(n) {
		t.Fatalf("%d goroutines started for %d connections at once", st.Goroutines, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "no goroutine waiting after Shutdown", func() bool { return s.Stats().IdleGoroutines == 0 })

	s2, addr2 := startWorkers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), time.Second)
	c := dialRaw(t, addr2)
	ask(t, c, "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
	_ = c.Close()
	testbin.Eventually(t, "the goroutine waiting", func() bool { return s2.Stats().IdleGoroutines == 1 })
	testbin.Eventually(t, "the goroutine done waiting", func() bool { return s2.Stats().IdleGoroutines == 0 })
}
