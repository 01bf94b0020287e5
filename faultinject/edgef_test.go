package faultinject

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestShutdownWith200WebSockets sends SIGTERM to the real binary relaying
// 200 WebSockets to a real demo home while a 2s request is in flight, with
// a drain grace of five minutes: every client gets a close frame with 1001
// before the request ends, the request ends with 200, the gateway exits
// without waiting for the grace and logs that nothing was cut.
func TestShutdownWith200WebSockets(t *testing.T) {
	t.Parallel()
	const n = 200
	g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{admin: true, extra: map[string]any{
		"server": map[string]any{"drain_grace": "5m", "max_conns_per_client": 1000}}}))
	u, _ := url.Parse(g.url)
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+u.Host+"/node/"+fiTarget+"/ws", nil)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		if _, _, err := c.ReadMessage(); err != nil { // the home's hello
			t.Fatalf("hello %d: %v", i, err)
		}
		conns[i] = c
	}
	type result struct {
		status int
		body   string
		err    error
		at     time.Time
	}
	slow := make(chan result, 1)
	go func() {
		res, body, err := g.get(&http.Client{Timeout: time.Minute}, "/node/"+fiTarget+"/slow?d=2s")
		r := result{body: body, err: err, at: time.Now()}
		if res != nil {
			r.status = res.StatusCode
		}
		slow <- r
	}()
	testbin.Eventually(t, "the slow request counted as a session", func() bool {
		_, body := g.adminDo(t, http.MethodGet, "/admin/homes/"+fiHome)
		var h struct{ Sessions int }
		return json.Unmarshal([]byte(body), &h) == nil && h.Sessions == n+1
	})
	start := time.Now()
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var lastClose time.Time
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("WebSocket %d: %v, want a close frame with 1001", i, err)
		}
		lastClose = time.Now()
	}
	r := <-slow
	if r.err != nil || r.status != http.StatusOK || r.body != "slow done" {
		t.Errorf("slow request: %d %q %v; want 200 slow done", r.status, r.body, r.err)
	}
	if !lastClose.Before(r.at) {
		t.Errorf("close frames ended %s after SIGTERM, the slow request %s: want the close frames first",
			lastClose.Sub(start), r.at.Sub(start))
	}
	if _, done := g.Wait(testbin.WaitLimit); !done {
		t.Fatalf("gateway still running long after the slow request ended\n%s", g.Output())
	}
	exited := time.Now()
	out := g.Output()
	noPanic(t, out)
	if !strings.Contains(out, "requests_cut=0 websockets_cut=0") || strings.Contains(out, "drain grace over") {
		t.Errorf("the drain cut something or waited for its grace:\n%s", out)
	}
	t.Logf("SIGTERM with %d WebSockets: close frames all out after %s, the 2s request done after %s, exit after %s",
		n, lastClose.Sub(start), r.at.Sub(start), exited.Sub(start))
}

// TestOneByteBodyCut sends a body at one byte per second to the real
// binary (floor 240 bytes per second after a 1s grace): it is cut with
// 408. Meanwhile a normal client's p99 is measured, idle and with 50 such
// clients, and logged with the ratio.
func TestOneByteBodyCut(t *testing.T) {
	t.Parallel()
	g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{extra: map[string]any{
		"server": map[string]any{"drain_grace": "2s", "min_rate_grace": "1s"}}}))
	u, _ := url.Parse(g.url)
	c := &http.Client{Timeout: testbin.WaitLimit}
	p99 := func() time.Duration {
		var d []time.Duration
		for range 200 {
			start := time.Now()
			res, _, err := g.get(c, fiWhoami)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("normal client: %v %v", res, err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d[len(d)*99/100]
	}
	p99() // wake the home
	idle := p99()

	trickle := func(conn net.Conn, stop <-chan struct{}) *http.Response {
		answered := make(chan *http.Response, 1)
		go func() {
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answered <- nil
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			answered <- res
		}()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case res := <-answered:
				return res
			case <-stop:
				conn.Close()
				return <-answered
			case <-tick.C:
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return <-answered
				}
			}
		}
	}
	open := func() net.Conn {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(testbin.WaitLimit))
		if _, err := io.WriteString(conn, "POST "+fiWhoami+" HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cut := make(chan *http.Response, 50)
	for range 50 {
		conn := open()
		wg.Go(func() { cut <- trickle(conn, stop) })
	}
	loaded := p99()
	close(stop)
	wg.Wait()
	close(cut)
	n408 := 0
	for res := range cut {
		if res != nil && res.StatusCode == http.StatusRequestTimeout {
			n408++
		}
	}
	t.Logf("normal client p99: idle %s, with 50 one-byte-per-second bodies %s (ratio %.2f); %d of 50 slow bodies already cut with 408",
		idle, loaded, float64(loaded)/float64(idle), n408)

	res := trickle(open(), nil)
	if res == nil || res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("one byte per second: %v, want 408", res)
	}
}
