package attack

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// floodWebSocket upgrades and writes 32 KiB messages until the connection
// breaks: a home that talks faster than its client reads.
func floodWebSocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	msg := []byte(strings.Repeat("f", 32<<10))
	for c.WriteMessage(websocket.BinaryMessage, msg) == nil {
	}
}

// legitimateWorst sends n plain requests one after another and returns
// the slowest one's latency (each must be answered 200).
func (s *suite) legitimateWorst(t *testing.T, n int) time.Duration {
	t.Helper()
	var worst time.Duration
	for range n {
		t0 := time.Now()
		if a := s.exchange(t, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n\r\n"); a.res.StatusCode != 200 {
			t.Fatalf("legitimate client: %d", a.res.StatusCode)
		}
		worst = max(worst, time.Since(t0))
	}
	return worst
}

// Ten clients that send a body at a byte every 200 ms, under a floor of
// 100 bytes per second, are cut with 408 once the grace is over, their
// sessions end, and a legitimate client is served throughout.
func TestAttackSlowBody(t *testing.T) {
	s := start(t)
	const n = 10
	cut := make(chan *http.Response, n)
	for range n {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A safety net against a gateway that never cuts, not a measurement.
		_ = c.SetDeadline(time.Now().Add(testbin.WaitLimit))
		if _, err := io.WriteString(c, "POST /node/h/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		go func() { cut <- testbin.Trickle(c, 200*time.Millisecond) }()
	}
	testbin.Eventually(t, "the slow bodies counted as sessions", func() bool { return s.g.Sessions().Count("h1") >= n })
	worst := s.legitimateWorst(t, 20)
	t.Logf("legitimate client beside %d slow-body clients: worst latency %s", n, worst)
	for i := range n {
		if res := <-cut; res == nil || res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow body %d: %v; want 408", i, res)
		}
	}
	testbin.Eventually(t, "the slow bodies' sessions ended", func() bool { return s.g.Sessions().Count("h1") == 0 })
}

// Ten clients that ask for a 16 MiB response and never read it: the
// gateway's writes stall, the response-rate floor closes each connection
// before the body is through, the sessions end, and a legitimate client
// is served throughout.
func TestAttackSlowRead(t *testing.T) {
	s := start(t)
	const n = 10
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := io.WriteString(c, "GET /node/h/big HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testbin.Eventually(t, "the slow readers counted as sessions", func() bool { return s.g.Sessions().Count("h1") >= n })
	worst := s.legitimateWorst(t, 20)
	t.Logf("legitimate client beside %d slow readers: worst latency %s", n, worst)
	testbin.Eventually(t, "the slow readers' sessions ended", func() bool { return s.g.Sessions().Count("h1") == 0 })
	// The client cannot see the close while the unread body still fills
	// the sockets' buffers; the kernel's table shows the gateway's side.
	for i, c := range conns {
		testbin.Eventually(t, fmt.Sprintf("slow reader %d's connection closed by the gateway", i), func() bool {
			return closedByServer(t, s.addr, c.LocalAddr())
		})
	}
}

// A hundred hostile WebSocket clients, each on a home that floods it and
// none reading or answering a close frame, do not hold the gateway's
// shutdown: Serve returns once the drain grace is over, every relay is
// cut and counted, and no goroutine of the relays is left.
func TestAttackShutdownWithHostileWebSockets(t *testing.T) {
	before := runtime.NumGoroutine()
	s := start(t)
	const n = 100
	var conns []net.Conn
	for i := range n {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		_, _ = io.WriteString(c, "GET /node/h/flood HTTP/1.1\r\nHost: gw\r\nOrigin: https://app.example\r\n"+
			"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		res, err := http.ReadResponse(bufio.NewReaderSize(c, 256), nil)
		if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade %d: %v %v", i, res, err)
		}
		conns = append(conns, c) // never read again
	}
	testbin.Eventually(t, "the WebSockets counted as sessions", func() bool { return s.g.Sessions().Count("h1") == n })
	t0 := time.Now()
	if err := s.shutdown(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	t.Logf("shutdown with %d hostile WebSockets took %s (drain grace 2s)", n, time.Since(t0))
	if logs := s.logs.String(); !strings.Contains(logs, "websockets_cut=") || strings.Contains(logs, "websockets_cut=0") {
		t.Errorf("the drain did not count cut WebSockets:\n%s", s.logs.Lines("drained"))
	}
	for i, c := range conns {
		if !closedByServer(t, s.addr, c.LocalAddr()) {
			t.Errorf("hostile WebSocket %d still open after shutdown", i)
		}
	}
	s.g.Close()
	s.home.CloseClientConnections()
	testbin.Eventually(t, "goroutines back to their count before the gateway started", func() bool {
		return runtime.NumGoroutine() <= before+2
	})
}

// closedByServer reports whether the gateway at server has closed its side
// of the TCP connection to client: the connection is gone from the
// kernel's table, or its server side is past ESTABLISHED (FIN_WAIT1 while
// the peer has not read the rest).
func closedByServer(t *testing.T, server string, client net.Addr) bool {
	t.Helper()
	sp, cp := portOf(t, server), portOf(t, client.String())
	for _, s := range testbin.TCPSockets() {
		if s.LocalPort == sp && s.RemotePort == cp {
			return s.State != "01" // 01 is ESTABLISHED
		}
	}
	return true
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
