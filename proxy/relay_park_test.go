//go:build linux

package proxy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// parkedPumps is the number of pumps waiting in p's parker now.
func parkedPumps(p *Proxy) int {
	p.parker.mu.Lock()
	defer p.parker.mu.Unlock()
	return len(p.parker.parked)
}

// pumpGoroutines is the number of goroutines running a relay's pump now.
func pumpGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "proxy.(*relay).run(")
}

// waitParked waits until n pumps are parked.
func waitParked(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for parkedPumps(p) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d pumps parked, want %d", parkedPumps(p), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRelayIdleParks: idle relays hold no goroutine (both pumps of each
// wait in the proxy's epoll set), and a parked pump relays again as soon
// as its side speaks, in either direction, over and over.
func TestRelayIdleParks(t *testing.T) {
	const n = 20

	// A home's writes go through its lock: the test writes too.
	type home struct {
		mu sync.Mutex
		c  *websocket.Conn
	}
	homes := make(chan *home, n)
	s, p, _ := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		h := &home{c: c}
		homes <- h
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			h.mu.Lock()
			err = c.WriteMessage(mt, msg)
			h.mu.Unlock()
			if err != nil {
				return
			}
		}
	}))

	clients := make([]*websocket.Conn, n)
	for i := range clients {
		clients[i] = wsDial(t, s)
	}
	waitParked(t, p, 2*n)
	if g := pumpGoroutines(); g != 0 {
		t.Fatalf("%d pump goroutines with every relay idle, want 0", g)
	}
	for round := range 3 {
		for i, c := range clients {
			want := []byte{byte(round), byte(i)}
			if err := c.WriteMessage(websocket.BinaryMessage, want); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(testWait))
			_, got, err := c.ReadMessage()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d client %d: echo %v, %v; want %v", round, i, got, err, want)
			}
		}
		waitParked(t, p, 2*n)
	}
	// The home speaks first: the home-to-client pump wakes alone.
	h := <-homes
	h.mu.Lock()
	err := h.c.WriteMessage(websocket.TextMessage, []byte("from home"))
	h.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The dials were one after the other: the first home is the first
	// client's.
	_ = clients[0].SetReadDeadline(time.Now().Add(testWait))
	_, m, err := clients[0].ReadMessage()
	got := string(m)
	if err != nil {
		t.Fatal(err)
	}
	if got != "from home" {
		t.Fatalf("the client got %q, want the home's message", got)
	}
}

// TestRelayParkedEnds: a relay whose pumps are parked ends when a side
// closes its connection and when its stop context ends, and gives its
// pumps' entries back.
func TestRelayParkedEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(testOptions())
	t.Cleanup(p.Close)
	ended := make(chan struct{}, 8)
	up := wsServer(t, echoHome)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(&ctxDetachWriter{ResponseWriter: w, ended: ended, ctx: ctx}, r, &Route{Kind: "node", Name: "n", Upstream: up()})
	}))
	t.Cleanup(s.Close)

	c1 := wsDial(t, s)
	waitParked(t, p, 2)
	c1.Close()
	waitEnded(t, ended, "the client closed a parked relay")
	waitParked(t, p, 0)

	_ = wsDial(t, s)
	_ = wsDial(t, s)
	waitParked(t, p, 4)
	cancel()
	waitEnded(t, ended, "the stop context ended")
	waitEnded(t, ended, "the stop context ended")
	waitParked(t, p, 0)
}

// TestRelayParkedAfterProxyClose: relays parked when the proxy closes go
// on relaying, each pump on a goroutine of its own.
func TestRelayParkedAfterProxyClose(t *testing.T) {
	s, p, ended := detachedFront(t, wsServer(t, echoHome))
	c := wsDial(t, s)
	waitParked(t, p, 2)
	p.Close()
	if n := parkedPumps(p); n != 0 {
		t.Fatalf("%d pumps parked after Close", n)
	}
	for i := range 3 {
		want := []byte{byte(i)}
		if err := c.WriteMessage(websocket.BinaryMessage, want); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		_, got, err := c.ReadMessage()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("echo %d after Close: %v, %v", i, got, err)
		}
	}
	c.Close()
	waitEnded(t, ended, "the client closed after the proxy's Close")
}

// ctxDetachWriter is detachWriter whose relay ends with ctx.
type ctxDetachWriter struct {
	http.ResponseWriter
	ended chan<- struct{}
	ctx   context.Context
}

func (w *ctxDetachWriter) Detach() (context.Context, func()) {
	ended := w.ended
	return w.ctx, func() { ended <- struct{}{} }
}

func (w *ctxDetachWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestProxyCloseTwice: a proxy closed twice, with relays parked or with
// none ever started, returns from each Close.
func TestProxyCloseTwice(t *testing.T) {
	twice := func(p *Proxy) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			p.Close()
			p.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(testWait):
			t.Fatal("a second Close did not return")
		}
	}
	twice(New(testOptions()))

	s, p, _ := detachedFront(t, wsServer(t, echoHome))
	_ = wsDial(t, s)
	waitParked(t, p, 2)
	twice(p)
}
