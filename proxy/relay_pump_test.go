package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/testbin"
)

// testWait bounds every wait of these tests for an event; it is never an
// assertion on speed.
const testWait = 30 * time.Second

// detachWriter is a ResponseWriter that lets the relay outlive its
// handler, as the gateway's does; ended receives once per relay end.
type detachWriter struct {
	http.ResponseWriter
	ended chan<- struct{}
}

// Detach returns an end that keeps nothing of the request alive.
func (w *detachWriter) Detach() (context.Context, func()) {
	ended := w.ended
	return context.Background(), func() { ended <- struct{}{} }
}

func (w *detachWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// detachedFront serves p on a loopback server whose handlers detach their
// relays; the returned channel receives once per relay that ended.
func detachedFront(t *testing.T, upstream func() *url.URL) (*httptest.Server, *Proxy, <-chan struct{}) {
	t.Helper()
	return newDetachedFront(t, upstream, false)
}

// newDetachedFront is detachedFront, served over TLS when overTLS.
func newDetachedFront(t *testing.T, upstream func() *url.URL, overTLS bool) (*httptest.Server, *Proxy, <-chan struct{}) {
	t.Helper()
	s, p, ended := newDetachedFrontUnstarted(t, upstream)
	if overTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s, p, ended
}

// newDetachedFrontUnstarted is detachedFront's server before its start.
func newDetachedFrontUnstarted(t *testing.T, upstream func() *url.URL) (*httptest.Server, *Proxy, <-chan struct{}) {
	t.Helper()
	p := New(testOptions())
	t.Cleanup(p.Close)
	ended := make(chan struct{}, 4096)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(&detachWriter{ResponseWriter: w, ended: ended}, r, &forward.Route{Kind: "node", Name: "n", Upstream: upstream()})
	}))
	return s, p, ended
}

// wsServer starts a WebSocket upstream that runs serve on each upgraded
// connection.
func wsServer(t *testing.T, serve func(c *websocket.Conn)) func() *url.URL {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	})
	return func() *url.URL { return u.url(t, "/") }
}

func wsDial(t *testing.T, s *httptest.Server) *websocket.Conn {
	t.Helper()
	d, scheme := *websocket.DefaultDialer, "ws://"
	if s.TLS != nil {
		d.TLSClientConfig, scheme = s.Client().Transport.(*http.Transport).TLSClientConfig, "wss://"
	}
	c, _, err := d.Dial(scheme+s.Listener.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitEnded(t *testing.T, ended <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(testWait):
		t.Fatalf("the relay did not end after %s", what)
	}
}

// message is the i-th test message of a direction: sizes from empty to
// past the relay's buffer, each byte telling its index.
func message(dir byte, i int) []byte {
	n := (i * 37) % 3000
	if i%1000 == 999 {
		n = 3*relayBufSize + 17
	}
	b := bytes.Repeat([]byte{dir, byte(i), byte(i >> 8)}, n/3+1)
	return b[:n]
}

// exchange writes n messages of direction dir on c while reading n
// messages of the other direction, and checks every one in order.
func exchange(c *websocket.Conn, dir, other byte, n int) error {
	werr := make(chan error, 1)
	go func() {
		for i := range n {
			if err := c.WriteMessage(websocket.BinaryMessage, message(dir, i)); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	for i := range n {
		_, got, err := c.ReadMessage()
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		if !bytes.Equal(got, message(other, i)) {
			return fmt.Errorf("message %d: %d bytes, not the %d sent", i, len(got), len(message(other, i)))
		}
	}
	return <-werr
}

// TestRelayBothDirectionsAtOnce sends 10,000 messages each way at the
// same time, of every size up to three relay buffers: each side reads
// every message of the other, whole and in order, and the relay ends
// once both have closed.
func TestRelayBothDirectionsAtOnce(t *testing.T) {
	t.Parallel()
	const n = 10000
	homeErr := make(chan error, 1)
	s, _, ended := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		homeErr <- exchange(c, 'h', 'c', n)
		_, _, _ = c.ReadMessage() // the client's close
	}))
	exchangeBoth(t, s, ended, homeErr, n, false)
}

// exchangeBoth is the client's side of a both-ways exchange of n messages
// through s (bounded by testWait with bounded), then the wait for the
// home's side (homeErr) and for the relay's end once the client closed.
func exchangeBoth(t *testing.T, s *httptest.Server, ended <-chan struct{}, homeErr <-chan error, n int, bounded bool) {
	t.Helper()
	c := wsDial(t, s)
	if bounded {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
	}
	if err := exchange(c, 'c', 'h', n); err != nil {
		t.Fatalf("client: %v", err)
	}
	select {
	case err := <-homeErr:
		if err != nil {
			t.Fatalf("home: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("the home did not finish")
	}
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	waitEnded(t, ended, "both sides closed")
}

// TestRelayFragmentsAndControlFrames sends a message in three fragments
// with a ping between them (client to home), and has the home ping the
// client: the home reads the whole message and answers the ping with a
// pong the client sees, the client's pong reaches the home, and the
// fragments arrive as they were sent.
func TestRelayFragmentsAndControlFrames(t *testing.T) {
	t.Parallel()
	homePong := make(chan string, 1)
	homeGot := make(chan string, 1)
	s, _, ended := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		c.SetPongHandler(func(data string) error { homePong <- data; return nil })
		_, msg, err := c.ReadMessage() // also answers the client's ping
		if err != nil {
			return
		}
		homeGot <- string(msg)
		_ = c.WriteControl(websocket.PingMessage, []byte("from home"), time.Now().Add(testWait))
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	c := dialRawWS(t, s.Listener.Addr().String())
	frames := [][]byte{
		rawFrame(0x1, false, "frag"), // text, not final
		rawFrame(0x9, true, "ping"),  // a ping between fragments
		rawFrame(0x0, false, "men"),  // continuation
		rawFrame(0x0, true, "ted"),   // final continuation
	}
	for _, f := range frames {
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if op, p := c.readFrame(t); op != 0xA || string(p) != "ping" {
		t.Fatalf("client got opcode %x %q, want the home's pong to its ping", op, p)
	}
	select {
	case got := <-homeGot:
		if got != "fragmented" {
			t.Fatalf("home read %q, want the fragments joined", got)
		}
	case <-time.After(testWait):
		t.Fatal("the home did not read the message")
	}
	if op, p := c.readFrame(t); op != 0x9 || string(p) != "from home" {
		t.Fatalf("client got opcode %x %q, want the home's ping", op, p)
	}
	if _, err := c.Write(rawFrame(0xA, true, "from client")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-homePong:
		if got != "from client" {
			t.Fatalf("home's pong %q", got)
		}
	case <-time.After(testWait):
		t.Fatal("the client's pong did not reach the home")
	}
	c.Close()
	waitEnded(t, ended, "the client closed")
}

// rawFrame is a masked client frame.
func rawFrame(op byte, fin bool, payload string) []byte {
	b := clientFrame(payload)
	b[0] = op
	if fin {
		b[0] |= 0x80
	}
	return b
}

// TestRelayCloseFromEachSide closes the WebSocket from the client, then
// on another from the home: the other side reads the close frame with
// its code and reason, and the relay ends.
func TestRelayCloseFromEachSide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		homeCloses bool
	}{{"client", false}, {"home", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			homeSaw := make(chan error, 1)
			s, p, ended := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
				if tt.homeCloses {
					_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "home says bye"), time.Now().Add(testWait))
				}
				_, _, err := c.ReadMessage()
				homeSaw <- err
			}))
			c := wsDial(t, s)
			if !tt.homeCloses {
				if err := c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "client says bye"), time.Now().Add(testWait)); err != nil {
					t.Fatal(err)
				}
			}
			_ = c.SetReadDeadline(time.Now().Add(testWait))
			_, _, err := c.ReadMessage()
			var ce *websocket.CloseError
			switch {
			case tt.homeCloses && (!errors.As(err, &ce) || ce.Code != 4000 || ce.Text != "home says bye"):
				t.Errorf("client read %v, want the home's close 4000", err)
			case !tt.homeCloses && (!errors.As(err, &ce) || ce.Code != 4001):
				t.Errorf("client read %v, want the home's echo of its close 4001", err)
			}
			select {
			case err := <-homeSaw:
				if !errors.As(err, &ce) || (!tt.homeCloses && ce.Text != "client says bye") {
					t.Errorf("home read %v, want the close frame", err)
				}
			case <-time.After(testWait):
				t.Fatal("the home read nothing")
			}
			waitEnded(t, ended, "the close")
			if n := p.WebSockets(); n != 0 {
				t.Errorf("%d relays left", n)
			}
		})
	}
}

// TestRelayHalfClose half-closes the client's TCP connection after one
// frame: the home reads the frame and then EOF, can still answer, and
// the client reads the answer and then EOF; the relay ends when the home
// closes.
func TestRelayHalfClose(t *testing.T) {
	t.Parallel()
	homeEOF := make(chan error, 1)
	s, _, ended := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		raw := c.UnderlyingConn()
		_ = raw.SetDeadline(time.Now().Add(testWait))
		got, err := io.ReadAll(raw) // the frame, then EOF
		if err == nil && !bytes.Equal(got, clientFrame("last words")) {
			err = fmt.Errorf("home read %q", got)
		}
		homeEOF <- err
		_, _ = raw.Write([]byte{0x82, 5, 'r', 'e', 'p', 'l', 'y'})
	}))
	c := dialRawWS(t, s.Listener.Addr().String())
	if _, err := c.Write(clientFrame("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-homeEOF:
		if err != nil {
			t.Fatalf("home: %v", err)
		}
	case <-time.After(testWait):
		t.Fatal("the home saw no EOF")
	}
	if op, p := c.readFrame(t); op != 0x2 || string(p) != "reply" {
		t.Fatalf("client read opcode %x %q after its half-close, want the home's reply", op, p)
	}
	if rest, err := io.ReadAll(c.br); err != nil || len(rest) != 0 {
		t.Fatalf("after the reply: %q %v, want EOF", rest, err)
	}
	waitEnded(t, ended, "both halves closed")
}

// TestRelaySlowReaderBoundsMemory has the home send as fast as it can to
// a client that reads nothing: the home's writes stall (backpressure)
// long before it has sent all it offered, the heap does not grow with
// what was sent, and the client then reads every byte in order.
func TestRelaySlowReaderBoundsMemory(t *testing.T) {
	const (
		msgSize = 256 << 10
		offered = 1024 // messages: 256 MiB
	)
	var sent atomic.Int64
	stalled := make(chan struct{})
	s, _, ended := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		defer close(stalled)
		msg := bytes.Repeat([]byte{'s'}, msgSize)
		for i := range offered {
			// A write that waits this long is the stall this test is
			// after; a slow machine only makes it come earlier.
			_ = c.SetWriteDeadline(time.Now().Add(3 * time.Second))
			binaryCounter(msg, i)
			if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
				return
			}
			sent.Add(1)
		}
	}))
	before := heapInUse()
	c := wsDial(t, s)
	select {
	case <-stalled:
	case <-time.After(10 * testWait):
		t.Fatal("the home never stalled nor finished")
	}
	during := heapInUse()
	n := sent.Load()
	t.Logf("home sent %d of %d messages (%d MiB) before stalling; heap %d -> %d KiB", n, offered, n*msgSize>>20, before>>10, during>>10)
	if n == offered {
		t.Fatalf("the home sent all %d MiB to a client reading nothing: no backpressure", offered*msgSize>>20)
	}
	if growth := during - before; growth > 16<<20 {
		t.Errorf("heap grew by %d MiB while the client read nothing", growth>>20)
	}
	for i := range n {
		_, got, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("message %d of %d: %v", i, n, err)
		}
		if len(got) != msgSize || !counterIs(got, int(i)) {
			t.Fatalf("message %d: wrong content", i)
		}
	}
	c.Close()
	waitEnded(t, ended, "the client closed")
}

func binaryCounter(b []byte, i int) { b[0], b[1], b[2] = byte(i), byte(i>>8), byte(i>>16) }

func counterIs(b []byte, i int) bool {
	return b[0] == byte(i) && b[1] == byte(i>>8) && b[2] == byte(i>>16)
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// hijackingHome starts an upstream that hijacks each request, writes
// answer as it is, then runs then on the connection and reads it to its
// end.
func hijackingHome(t *testing.T, answer string, then func(conn net.Conn, brw *bufio.ReadWriter)) func() *url.URL {
	t.Helper()
	home := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, answer)
		if then != nil {
			then(conn, brw)
		}
		_, _ = io.Copy(io.Discard, brw)
	})
	return func() *url.URL { return home.url(t, "/") }
}

// rawUpgrade sends a WebSocket upgrade with fields added to its head and
// after written in the same packet, and reads the 101.
func rawUpgrade(t *testing.T, s *httptest.Server, fields string, after []byte) (*rawWS, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(testWait))
	_, err = c.Write(append([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+fields+"\r\n"), after...))
	if err != nil {
		t.Fatal(err)
	}
	ws := &rawWS{Conn: c, br: bufio.NewReader(c)}
	res, err := http.ReadResponse(ws.br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	return ws, res
}

// switching is the head of a home's 101, up to its end.
const switching = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"

// TestRelayCarriesBytesSentWithTheHandshake writes the client's first
// frame in the same packet as its handshake, and has the home write its
// first frame in the same write as its 101: both arrive (neither waits in
// the server's or the transport's reader for more bytes).
func TestRelayCarriesBytesSentWithTheHandshake(t *testing.T) {
	t.Parallel()
	homeGot := make(chan []byte, 1)
	home := hijackingHome(t, switching+"\r\n\x81\x05hello", func(conn net.Conn, brw *bufio.ReadWriter) {
		got := make([]byte, len(clientFrame("early")))
		_ = conn.SetReadDeadline(time.Now().Add(testWait))
		if _, err := io.ReadFull(brw, got); err == nil {
			homeGot <- got
		}
	})
	s, _, _ := detachedFront(t, home)
	ws, _ := rawUpgrade(t, s, "", clientFrame("early"))
	if op, p := ws.readFrame(t); op != 0x1 || string(p) != "hello" {
		t.Fatalf("client read %x %q, want the home's first frame", op, p)
	}
	select {
	case got := <-homeGot:
		if !bytes.Equal(got, clientFrame("early")) {
			t.Fatalf("home read %q", got)
		}
	case <-time.After(testWait):
		t.Fatal("the client's first frame never reached the home")
	}
}

// TestRelayHandshakeLongerThanItsBuffers: an upgrade's upstream
// connection has buffers of upgradeBufSize; a 101 whose head is longer
// than that, with frames longer than that sent behind it in the same
// write, reaches the client whole and in order.
func TestRelayHandshakeLongerThanItsBuffers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*upgradeBufSize)
	var behind []byte
	for i := range 20 {
		behind = append(behind, 0x81, 100)
		behind = append(behind, bytes.Repeat([]byte{byte('a' + i)}, 100)...)
	}
	if len(behind) <= upgradeBufSize {
		t.Fatalf("%d bytes behind the 101: not past the buffer", len(behind))
	}
	home := hijackingHome(t, switching+"X-Long: "+long+"\r\n\r\n"+string(behind), nil)
	s, p, _ := detachedFront(t, home)
	for i, tr := range p.upgrades {
		if tr.ReadBufferSize != upgradeBufSize || tr.WriteBufferSize != upgradeBufSize {
			t.Errorf("upgrade transport %d: buffers %d/%d, want %d", i, tr.ReadBufferSize, tr.WriteBufferSize, upgradeBufSize)
		}
	}
	ws, res := rawUpgrade(t, s, "X-Long: "+long+"\r\n", nil)
	if got := res.Header.Get("X-Long"); got != long {
		t.Errorf("the 101's long field came with %d bytes, want %d", len(got), len(long))
	}
	for i := range 20 {
		op, p := ws.readFrame(t)
		if op != 0x1 || !bytes.Equal(p, bytes.Repeat([]byte{byte('a' + i)}, 100)) {
			t.Fatalf("frame %d: opcode %x, %q", i, op, p)
		}
	}
}

// TestRelayIdleHoldsNoBuffer opens WebSockets, has each exchange one
// message and go idle: every buffer the pumps took is back in the pool
// (none is held by an idle relay).
func TestRelayIdleHoldsNoBuffer(t *testing.T) {
	t.Parallel()
	s, p, _ := detachedFront(t, wsServer(t, func(c *websocket.Conn) {
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, msg); err != nil {
				return
			}
		}
	}))
	const n = 20
	var wg sync.WaitGroup
	for range n {
		c := wsDial(t, s)
		wg.Go(func() {
			if err := c.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := c.ReadMessage(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Each echo was read by the client, so each pump has written it and
	// is between its put and its next wait.
	deadline := time.Now().Add(testWait)
	for p.relayBufs.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d buffers still out with every relay idle", p.relayBufs.Load())
		}
		runtime.Gosched()
	}
}

// upgradeWatcher is a client connection wrapper that reads straight
// through (PlainConn) and notes its Upgraded call, as the edge's framing
// watcher does.
type upgradeWatcher struct {
	net.Conn
	upgraded *atomic.Int32
}

func (c *upgradeWatcher) PlainConn() net.Conn { return c.Conn }
func (c *upgradeWatcher) Upgraded()           { c.upgraded.Add(1) }

// watchedListener wraps each accepted connection in an upgradeWatcher.
type watchedListener struct {
	net.Listener
	upgraded *atomic.Int32
}

func (l watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &upgradeWatcher{Conn: c, upgraded: l.upgraded}, nil
}

// TestRelayTellsWrappersUpgraded: before its pumps start, a relay calls
// Upgraded on each wrapper of the client's connection, found through
// PlainConn, once; plain requests call nothing.
func TestRelayTellsWrappersUpgraded(t *testing.T) {
	var upgraded atomic.Int32
	s, _, ended := newDetachedFrontUnstarted(t, wsServer(t, echoHome))
	s.Listener = watchedListener{Listener: s.Listener, upgraded: &upgraded}
	s.Start()
	t.Cleanup(s.Close)

	c := wsDial(t, s)
	// The client has its 101 just before the relay starts and tells the
	// wrappers: wait for the call, then check it came once.
	testbin.Eventually(t, "Upgraded called", func() bool { return upgraded.Load() > 0 })
	if err := c.WriteMessage(websocket.TextMessage, []byte("after")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(testWait))
	if _, m, err := c.ReadMessage(); err != nil || string(m) != "after" {
		t.Fatalf("echo through the told wrapper: %q, %v", m, err)
	}
	if n := upgraded.Load(); n != 1 {
		t.Fatalf("Upgraded called %d times for one relay, want 1", n)
	}
	c.Close()
	waitEnded(t, ended, "the client closed")
}
