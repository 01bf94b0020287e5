//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/testbin"
)

// parkedPumps is the number of pumps waiting in p's parker now.
func parkedPumps(p *Proxy) int {
	p.parker.mu.Lock()
	defer p.parker.mu.Unlock()
	return p.parker.parked
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
	testbin.Eventually(t, fmt.Sprintf("%d pumps parked", n), func() bool { return parkedPumps(p) == n })
}

// TestRelayIdleParks: idle relays hold no goroutine (both pumps of each
// wait in the proxy's epoll set), and a parked pump relays again as soon
// as its side speaks, in either direction, over and over.
func TestRelayIdleParks(t *testing.T) {
	const n = 20

	// A home's writes go through its lock: the test writes too. client
	// is the index of the client it serves, learnt from the first
	// message (the homes may reach the channel in another order than
	// the clients dialled).
	type home struct {
		mu     sync.Mutex
		c      *websocket.Conn
		client int
	}
	homes := make(chan *home, n)
	s, p, _ := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		h := &home{c: c, client: -1}
		homes <- h
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			h.mu.Lock()
			if h.client < 0 && len(msg) == 2 {
				h.client = int(msg[1])
			}
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
	i := h.client
	err := h.c.WriteMessage(websocket.TextMessage, []byte("from home"))
	h.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 {
		t.Fatal("a home got no message in the rounds")
	}
	_ = clients[i].SetReadDeadline(time.Now().Add(testWait))
	_, m, err := clients[i].ReadMessage()
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
	s, p, ended := stopFront(t, ctx)

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

// stopWatches is the number of watches on stop channels p holds now, and
// how many relays share the watch on done.
func stopWatches(p *Proxy, done <-chan struct{}) (watches, sharing int) {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	if w := p.stops[done]; w != nil {
		sharing = w.n
	}
	return len(p.stops), sharing
}

// TestRelayStopsShareOneWatch: relays that end with the same context (all
// of a gateway's, at its hard stop) share one watch on it, which goes
// when the last of them ends; and a relay whose context ended before its
// watch began is cut at once.
func TestRelayStopsShareOneWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, p, ended := stopFront(t, ctx)

	clients := []*websocket.Conn{wsDial(t, s), wsDial(t, s), wsDial(t, s)}
	// A client has its 101 before its relay is tracked: wait for the
	// third, then count the watches.
	testbin.Eventually(t, "three relays tracked", func() bool {
		_, n := stopWatches(p, ctx.Done())
		return n == 3
	})
	if w, n := stopWatches(p, ctx.Done()); w != 1 || n != 3 {
		t.Fatalf("%d watches, %d relays on the context's; want 1 shared by 3", w, n)
	}
	clients[0].Close()
	waitEnded(t, ended, "a client closed")
	if w, n := stopWatches(p, ctx.Done()); w != 1 || n != 2 {
		t.Fatalf("after one relay ended: %d watches, %d relays on the context's; want 1 shared by 2", w, n)
	}
	cancel()
	waitEnded(t, ended, "the stop context ended")
	waitEnded(t, ended, "the stop context ended")
	if w, _ := stopWatches(p, ctx.Done()); w != 0 {
		t.Fatalf("%d watches after every relay ended, want 0", w)
	}

	// The context is over now: a new relay with it is cut as it starts.
	c := wsDial(t, s)
	waitEnded(t, ended, "a relay whose stop context was over before it started")
	_ = c.SetReadDeadline(time.Now().Add(testWait))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("the client of a relay stopped before it started read a message, want its connection closed")
	}
	if w, _ := stopWatches(p, ctx.Done()); w != 0 {
		t.Fatalf("%d watches after the relay ended, want 0", w)
	}
}

// TestParkerSlotsRefuseStaleTokens: a slot freed and given to another
// park answers only to the new park's token, so that an event that came
// for the old one, and is read after, wakes nothing.
func TestParkerSlotsRefuseStaleTokens(t *testing.T) {
	var k parker
	rel := &relay{}
	a, b := &rel.pumps[0], &rel.pumps[1]
	tokA := k.put(rel, a)
	a.token = tokA
	if _, ok := k.take(tokA); !ok {
		t.Fatal("a parked pump's own token found nothing")
	}
	if a.token != 0 {
		t.Fatalf("a taken pump keeps token %#x", a.token)
	}
	tokB := k.put(rel, b)
	if uint32(tokB) != uint32(tokA) {
		t.Fatalf("the freed slot %d was not reused (got %d)", uint32(tokA), uint32(tokB))
	}
	if _, ok := k.take(tokA); ok {
		t.Fatal("the old token took the slot's new park")
	}
	if _, ok := k.take(stopToken); ok {
		t.Fatal("the stop token took a park")
	}
	pp, ok := k.take(tokB)
	if !ok || pp.pu != b || k.parked != 0 {
		t.Fatalf("take(new token) = %v, %v with %d parked; want pump b and none left", pp.pu, ok, k.parked)
	}
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

// stopFront serves a new proxy on a loopback server whose relays detach
// and end with ctx; ended receives once per relay that ended.
func stopFront(t *testing.T, ctx context.Context) (*httptest.Server, *Proxy, <-chan struct{}) {
	t.Helper()
	p := New(testOptions())
	t.Cleanup(p.Close)
	ended := make(chan struct{}, 8)
	up := wsServer(t, echoHome)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(&ctxDetachWriter{ResponseWriter: w, ended: ended, ctx: ctx}, r, &forward.Route{Kind: "node", Name: "n", Upstream: up()})
	}))
	t.Cleanup(s.Close)
	return s, p, ended
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

// TestPumpWaitAdapts: a pump starts by waiting parkAfterMin before it
// parks, waits longer each time it was woken soon after parking (up to
// parkAfterMax), and starts over after a long park.
func TestPumpWaitAdapts(t *testing.T) {
	var pu pump
	soon, late := uint32(parkAfterMax/time.Millisecond)-1, uint32(parkAfterMax/time.Millisecond)
	steps := []struct {
		parkedFor uint32
		want      time.Duration
	}{
		{soon, 2 * parkAfterMin},
		{soon, 4 * parkAfterMin},
		{soon, 8 * parkAfterMin},
		{soon, parkAfterMax},
		{soon, parkAfterMax},
		{late, parkAfterMin},
		{1, 2 * parkAfterMin},
	}
	if got := pu.waitBeforePark(); got != parkAfterMin {
		t.Fatalf("a new pump waits %v, want %v", got, parkAfterMin)
	}
	for i, s := range steps {
		// Parked 3 ms before the 32-bit clock wraps, and at other times.
		pu.parkedAt = uint32(i)*(1<<30) - 3
		pu.woken(pu.parkedAt + s.parkedFor)
		if got := pu.waitBeforePark(); got != s.want {
			t.Fatalf("step %d (parked %d ms): waits %v, want %v", i, s.parkedFor, got, s.want)
		}
	}
}
