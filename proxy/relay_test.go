package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/wakegate/wakegate/forward"
	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/internal/testbin"
)

// wsHome is a real WebSocket upstream that echoes every message and
// reports, on closes, the close code each connection received (or -1 when
// the connection broke without a close frame) and, on msgs, each message.
type wsHome struct {
	*upstream
	closes chan int
	msgs   chan string
}

func newWSHome(t *testing.T) *wsHome {
	t.Helper()
	h := &wsHome{closes: make(chan int, 1024), msgs: make(chan string, 1024)}
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	h.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, data, err := c.ReadMessage()
			if err != nil {
				code := -1
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					code = ce.Code
				}
				h.closes <- code
				return
			}
			h.msgs <- string(data)
			if err := c.WriteMessage(mt, data); err != nil {
				return
			}
		}
	})
	return h
}

func wsRoute(t *testing.T, h *wsHome) func() *forward.Route {
	return func() *forward.Route { return &forward.Route{Kind: "node", Name: "n", Upstream: h.url(t, "/")} }
}

// TestGoingAwayClosesBothSides opens WebSockets through the proxy to a
// real WebSocket upstream and calls GoingAway: every client gets a close
// frame with 1001 (not a broken connection), the upstream gets one too on
// every connection (a masked client frame, or gorilla would refuse it), and
// the relays end.
func TestGoingAwayClosesBothSides(t *testing.T) {
	t.Parallel()
	home := newWSHome(t)
	s, p := front(t, testOptions(), wsRoute(t, home))
	const n = 20
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+s.Listener.Addr().String()+"/ws", nil)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		if err := c.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, msg, err := c.ReadMessage(); err != nil || string(msg) != "hi" {
			t.Fatalf("echo %d: %q %v", i, msg, err)
		}
		conns[i] = c
	}
	if got := p.WebSockets(); got != n {
		t.Fatalf("WebSockets() = %d, want %d", got, n)
	}
	if got := p.GoingAway(); got != n {
		t.Errorf("GoingAway() = %d, want %d", got, n)
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("client %d: %v, want a close frame with 1001", i, err)
		}
		c.Close()
	}
	for i := range n {
		select {
		case code := <-home.closes:
			if code != websocket.CloseGoingAway {
				t.Errorf("upstream connection %d ended with %d, want a close frame with 1001", i, code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("upstream saw %d of %d connections end", i, n)
		}
	}
	testbin.Eventually(t, "every relay closed", func() bool { return p.WebSockets() == 0 })
}

// rawWS is a WebSocket client on a raw connection, so that a test can
// write half a frame.
type rawWS struct {
	net.Conn
	br *bufio.Reader
}

func dialRawWS(t *testing.T, addr string) *rawWS {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, err = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+addr+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	return &rawWS{Conn: c, br: br}
}

// frame returns a masked client text frame carrying msg.
func clientFrame(msg string) []byte {
	key := [4]byte{1, 2, 3, 4}
	b := []byte{0x81, 0x80 | byte(len(msg))}
	b = append(b, key[:]...)
	for i := range len(msg) {
		b = append(b, msg[i]^key[i%4])
	}
	return b
}

// readFrame reads one unmasked server frame: its opcode and payload.
func (c *rawWS) readFrame(t *testing.T) (byte, []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if h[1]&0x80 != 0 || h[1]&0x7f > 125 {
		t.Fatalf("frame header %x: want an unmasked short frame", h)
	}
	p := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(c.br, p); err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return h[0] & 0x0f, p
}

// TestGoingAwayWaitsForTheFrameInProgress has a client write half a frame,
// then calls GoingAway: the client gets its close frame at once, while the
// close toward the upstream waits until the client's frame is complete, so
// the upstream reads the whole message and then the close (a close frame
// written inside the half frame would corrupt the stream).
func TestGoingAwayWaitsForTheFrameInProgress(t *testing.T) {
	t.Parallel()
	home := newWSHome(t)
	s, p := front(t, testOptions(), wsRoute(t, home))
	c := dialRawWS(t, s.Listener.Addr().String())
	const msg = "a message cut in two"
	f := clientFrame(msg)
	if _, err := c.Write(f[:9]); err != nil {
		t.Fatal(err)
	}
	// Wait until the half frame has been relayed toward the upstream.
	testbin.Eventually(t, "the half frame relayed", func() bool { return midFrameToHome(p) })
	if got := p.GoingAway(); got != 1 {
		t.Fatalf("GoingAway() = %d, want 1", got)
	}
	op, payload := c.readFrame(t)
	if op != 0x8 || len(payload) < 2 || binary.BigEndian.Uint16(payload) != websocket.CloseGoingAway {
		t.Fatalf("client got opcode %x payload %q, want a close frame with 1001", op, payload)
	}
	if _, err := c.Write(f[9:]); err != nil {
		t.Fatal(err)
	}
	// The upstream reads in order: the message, then the close.
	select {
	case got := <-home.msgs:
		if got != msg {
			t.Errorf("upstream read %q, want %q", got, msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream never read the message")
	}
	select {
	case code := <-home.closes:
		if code != websocket.CloseGoingAway {
			t.Errorf("upstream connection ended with %d, want a close frame with 1001", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream connection never ended")
	}
	// The echo of the message is not relayed after the close frame.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(c.br)
	if strings.Contains(string(rest), msg) {
		t.Errorf("client got data after the close frame: %q", rest)
	}
}

// midFrameToHome reports whether p relays one WebSocket whose writer
// toward the home is inside a frame.
func midFrameToHome(p *Proxy) bool {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	for r := range p.relays {
		r.toHome.mu.Lock()
		mid := !r.toHome.cur.between()
		r.toHome.mu.Unlock()
		return mid
	}
	return false
}

// testFrame builds a frame of opcode op with an n-byte payload.
func testFrame(op byte, n int, masked bool) []byte {
	b := []byte{0x80 | op}
	m := byte(0)
	if masked {
		m = 0x80
	}
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = append(b, m|126, byte(n>>8), byte(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if masked {
		b = append(b, 9, 8, 7, 6)
	}
	return append(b, make([]byte, n)...)
}

// TestFrameCursor feeds streams of frames to a frameCursor in one piece,
// byte by byte and in odd chunks, and checks it finds every frame's end and
// a whole close frame.
func TestFrameCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"short", [][]byte{testFrame(1, 5, false), testFrame(2, 0, false)}},
		{"16-bit length", [][]byte{testFrame(2, 200, true), testFrame(1, 1, true)}},
		{"64-bit length", [][]byte{testFrame(2, 70000, false), testFrame(9, 0, false)}},
		{"close", [][]byte{testFrame(1, 3, true), testFrame(8, 2, true)}},
	} {
		var stream []byte
		var ends []int
		for _, f := range tc.frames {
			stream = append(stream, f...)
			ends = append(ends, len(stream))
		}
		for _, chunk := range []int{len(stream), 1, 7, 4096} {
			t.Run(tc.name+"/chunk "+strconv.Itoa(chunk), func(t *testing.T) {
				var c frameCursor
				var got []int
				off := 0
				for off < len(stream) {
					p := stream[off:min(off+chunk, len(stream))]
					for len(p) > 0 {
						n, boundary := c.next(p)
						off += n
						p = p[n:]
						if boundary {
							got = append(got, off)
						}
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(ends) {
					t.Errorf("frame ends at %v, want %v", got, ends)
				}
				if want := tc.name == "close"; c.closeDone != want {
					t.Errorf("closeDone = %v, want %v", c.closeDone, want)
				}
			})
		}
	}
}

// TestGoingAwayLeavesNoGoroutine relays WebSockets, tells them to go away
// and closes the servers: no goroutine of a relay or of its close frame
// writers is left. It does not run in parallel, so that goleak sees only
// its own goroutines.
func TestGoingAwayLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	func() {
		home := newWSHome(t)
		defer home.Close()
		p := New(testOptions())
		defer p.Close()
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.Serve(w, r, &forward.Route{Kind: "node", Name: "n", Upstream: home.url(t, "/")})
		}))
		defer s.Close()
		for range 5 {
			c, _, err := websocket.DefaultDialer.Dial("ws://"+s.Listener.Addr().String()+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		testbin.Eventually(t, "five relays open", func() bool { return p.WebSockets() == 5 })
		p.GoingAway()
	}()
	if err := goleak.Find(before); err != nil {
		t.Error(err)
	}
}
