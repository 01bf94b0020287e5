package proxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"sync"
)

// A relayed WebSocket is two raw connections joined by two pumps
// (relay_pump.go): one copies the home's bytes to the client, the other the
// client's bytes to the home. To end such a relay cleanly (at shutdown) the proxy
// writes a close frame (1001 going away) to each side, which is only
// allowed between frames: a close frame written inside a data frame that
// is half relayed would corrupt the stream. So every write of a pump goes
// through a frameWriter, which follows the frame boundaries of what it
// writes and serialises the pump's writes with the close frame.

// closeGoingAway is the close status sent to both sides at shutdown.
const closeGoingAway = 1001

// relay is one relayed WebSocket: the writer toward the client and the
// writer toward the home, and what its pumps need (relay_pump.go). Its
// close frames are written by goroutines it owns; the relay waits for them
// once it has ended.
type relay struct {
	toClient frameWriter
	toHome   frameWriter
	once     sync.Once
	wg       sync.WaitGroup

	relayState
}

// goingAway sends a close frame to both sides, each at the end of the
// frame in progress on its side. It returns at once; the writes run on
// goroutines that end when the frames are written or the connections
// close. It is called with the proxy's relay lock held.
func (r *relay) goingAway() {
	r.once.Do(func() {
		for _, w := range []*frameWriter{&r.toClient, &r.toHome} {
			r.wg.Go(w.goingAway)
		}
	})
}

// IsWebSocket reports whether r asks for a WebSocket upgrade.
func IsWebSocket(r *http.Request) bool { return isWebSocket(r) }

// isWebSocket reports whether r asks to upgrade to WebSocket.
func isWebSocket(r *http.Request) bool {
	return isUpgrade(r) && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// track registers a relay whose two sides are known, to be closed when
// stop ends. The relays that end with the same context (all of a
// gateway's end with its hard stop) share one watch on it.
func (p *Proxy) track(r *relay, stop context.Context) {
	p.relayMu.Lock()
	p.relays[r] = struct{}{}
	if p.goingAway {
		r.goingAway() // the drain began while this one was upgrading
	}
	if done := stop.Done(); done != nil {
		w := p.stops[done]
		if w == nil {
			w = &stopWatch{}
			w.stop = context.AfterFunc(stop, func() { p.stopRelays(done) })
			p.stops[done] = w
		}
		w.n++
		r.stop = done
	}
	p.relayMu.Unlock()
	if r.stop != nil {
		select {
		case <-r.stop:
			// Closed before the watch could see this relay (its
			// function may have run already): close it here.
			r.closeConns()
		default:
		}
	}
}

// untrack forgets r and waits for its close frame writers. The relay has
// ended, so its connections are closed and the writers cannot block.
func (p *Proxy) untrack(r *relay) {
	p.relayMu.Lock()
	delete(p.relays, r)
	if r.stop != nil {
		if w := p.stops[r.stop]; w != nil {
			if w.n--; w.n == 0 {
				w.stop()
				delete(p.stops, r.stop)
			}
		}
	}
	p.relayMu.Unlock()
	r.wg.Wait()
}

// stopWatch is the one watch on a stop channel that its relays share.
type stopWatch struct {
	n    int         // relays that stop with it
	stop func() bool // ends the watch (context.AfterFunc)
}

// stopRelays closes the connections of every relay whose stop is done.
func (p *Proxy) stopRelays(done <-chan struct{}) {
	var stopped []*relay
	p.relayMu.Lock()
	for r := range p.relays {
		if r.stop == done {
			stopped = append(stopped, r)
		}
	}
	p.relayMu.Unlock()
	for _, r := range stopped {
		r.closeConns()
	}
}

// WebSockets returns the number of WebSockets being relayed now.
func (p *Proxy) WebSockets() int {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	return len(p.relays)
}

// GoingAway sends a close frame with status 1001 (going away) to both
// sides of every relayed WebSocket, and of every one upgraded from now on,
// each written between two frames of its side. It returns at once with the
// number of WebSockets open when it was called; each relay then ends when
// its sides close their connections, or when its request's context ends.
func (p *Proxy) GoingAway() int {
	p.relayMu.Lock()
	defer p.relayMu.Unlock()
	p.goingAway = true
	for r := range p.relays {
		r.goingAway()
	}
	return len(p.relays)
}

// frameWriter writes one direction of a relayed WebSocket and follows its
// frame boundaries, so that a close frame goes between two frames.
type frameWriter struct {
	w   io.Writer
	mu  sync.Mutex
	cur frameCursor
	// masked: frames toward the home are client frames and must be masked.
	masked  bool
	pending bool // a close frame waits for the end of the frame in progress
	closed  bool // a close frame went this way: nothing more is written
}

// Write relays p. Once a close frame is pending, p is written up to the
// end of the frame in progress, then the close frame; anything after a
// close frame is dropped (the peer may send nothing but its own close
// reply, which the other side already had from the gateway).
func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return len(p), nil
	}
	if !f.pending {
		if _, err := f.w.Write(p); err != nil {
			return 0, err
		}
		f.cur.skip(p)
		if f.cur.closeDone {
			f.closed = true // a close went this way on its own
		}
		return len(p), nil
	}
	n, boundary := f.cur.next(p)
	if _, err := f.w.Write(p[:n]); err != nil {
		return 0, err
	}
	switch {
	case boundary && f.cur.closeDone:
		f.pending, f.closed = false, true // the peer's own close went first
	case boundary:
		if err := f.writeCloseLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// isClosed reports whether a close frame went this way.
func (f *frameWriter) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// goingAway writes the close frame now when no frame is in progress, or
// leaves it for the Write that ends the frame.
func (f *frameWriter) goingAway() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if !f.cur.between() {
		f.pending = true
		return
	}
	_ = f.writeCloseLocked() // a broken connection ends the relay anyway
}

func (f *frameWriter) writeCloseLocked() error {
	f.pending, f.closed = false, true
	_, err := f.w.Write(closeFrame(closeGoingAway, f.masked))
	return err
}

// closeFrame is a close frame with status code and no reason; masked with
// a random key when it goes from client to server.
func closeFrame(code uint16, masked bool) []byte {
	var payload [2]byte
	binary.BigEndian.PutUint16(payload[:], code)
	if !masked {
		return []byte{0x88, 2, payload[0], payload[1]}
	}
	var key [4]byte
	_, _ = rand.Read(key[:])
	return []byte{0x88, 0x80 | 2, key[0], key[1], key[2], key[3], payload[0] ^ key[0], payload[1] ^ key[1]}
}

// frameCursor follows WebSocket frame boundaries across writes (RFC 6455
// section 5.2): a header of 2 to 14 bytes, then the payload.
type frameCursor struct {
	left uint64 // payload bytes still to come
	hdr  [14]byte
	hn   uint8 // header bytes seen of the frame in progress
	// inClose: the frame in progress is a close frame; closeDone: a whole
	// close frame has passed.
	inClose, closeDone bool
}

// between reports whether the cursor is between two frames.
func (c *frameCursor) between() bool { return c.hn == 0 && c.left == 0 }

// skip follows all of p.
func (c *frameCursor) skip(p []byte) {
	for len(p) > 0 {
		n, _ := c.next(p)
		p = p[n:]
	}
}

// next follows p up to the end of the frame in progress: it returns how
// many bytes of p belong to that frame (all of p when it does not end
// inside p) and whether the cursor is then between frames.
func (c *frameCursor) next(p []byte) (int, bool) {
	n := 0
	for n < len(p) {
		if c.left > 0 {
			k := min(uint64(len(p)-n), c.left)
			n += int(k)
			c.left -= k
			if c.left == 0 {
				c.endFrame()
				return n, true
			}
			continue
		}
		c.hdr[c.hn] = p[n]
		c.hn++
		n++
		if c.hn < 2 || int(c.hn) < headerLen(c.hdr[1]) {
			continue
		}
		c.left = payloadLen(c.hdr[:c.hn])
		c.inClose = c.hdr[0]&0x0f == 0x8
		c.hn = 0
		if c.left == 0 {
			c.endFrame()
			return n, true
		}
	}
	return n, c.between()
}

func (c *frameCursor) endFrame() {
	if c.inClose {
		c.closeDone = true
	}
}

// headerLen is the length of a frame header whose second byte is b1.
func headerLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// payloadLen is the payload length of a complete frame header.
func payloadLen(h []byte) uint64 {
	switch l := h[1] & 0x7f; l {
	case 126:
		return uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		return binary.BigEndian.Uint64(h[2:10])
	default:
		return uint64(l)
	}
}
