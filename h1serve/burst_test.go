package h1serve

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventLog is the order in which handlers ended and answers were written.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// recordingListener hands out connections whose writes are logged.
type recordingListener struct {
	net.Listener
	log *eventLog
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, log: l.log}, nil
}

type recordingConn struct {
	net.Conn
	log *eventLog
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.log.add("write")
	return c.Conn.Write(p)
}

// TestAnswersLeaveInABurst: when several connections finish their answer
// at once, each lets the others reach their flush before it writes, so
// the client is woken once per burst. On one CPU that order is nearly
// exact: the handlers end before the answers are written.
func TestAnswersLeaveInABurst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 6
	var events eventLog
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Done()
		<-release
		_, _ = io.WriteString(w, r.URL.Path)
		events.add("handler " + r.URL.Path)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(recordingListener{Listener: ln, log: &events}) }()
	defer func() { _ = s.Close(); <-served }()

	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialRaw(t, ln.Addr().String())
		if _, err := fmt.Fprintf(conns[i], "GET /%d HTTP/1.1\r\nHost: t\r\n\r\n", i); err != nil {
			t.Fatal(err)
		}
	}
	started.Wait()
	close(release)
	for i, c := range conns {
		b := make([]byte, 512)
		m, err := c.Read(b)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := fmt.Sprintf("\r\n\r\n/%d", i); !strings.HasSuffix(string(b[:m]), want) {
			t.Fatalf("answer %d is %q, want it to end in %q", i, b[:m], want)
		}
	}
	got := events.snapshot()
	if len(got) != 2*n {
		t.Fatalf("events %q, want %d handler ends and %d writes", got, n, n)
	}
	// The scheduler takes a goroutine from its global queue, where a
	// yield puts it, once every 61 turns even when others wait: one
	// answer may leave early. Without the yield every answer but the
	// last leaves before the next handler ends.
	early := 0
	for _, e := range got[:n] {
		if e == "write" {
			early++
		}
	}
	if early > 1 {
		t.Fatalf("events %q: %d answers were written before every handler had ended, want at most 1", got, early)
	}
}
