package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/proxy/h1client"
)

// An upgraded WebSocket is relayed by two pumps, one per direction, that
// cost almost nothing while the connection is idle: a pump parks on the
// netpoller until its source is readable (through the descriptor, with no
// buffer), then reads into a pooled buffer, writes it on and gives the
// buffer back. The handshake is ReverseProxy's (Rewrite, the transports,
// ModifyResponse); at the 101 the proxy takes over from it (handOff): it
// hijacks the client, writes the 101, starts the pumps and, when the
// ResponseWriter offers it (Detacher), lets the handler return, so that
// neither the handler's goroutine and deep stack nor the server's and the
// transport's bufio readers and writers stay alive for the life of the
// WebSocket.
//
// What passes through unchanged: every byte, in order, of both directions
// (ping, pong and close frames included; the bytes that arrived with the
// handshake first), and a half-close (a side's EOF half-closes the other
// side's connection and the other direction goes on until its own EOF). A
// slow reader applies backpressure: a pump holds at most one buffer and
// blocks in its write until the reader takes it.

// Detacher is implemented by a ResponseWriter (or one it wraps, found
// through Unwrap) whose request may be over before its WebSocket is: once
// the upgrade is done, Serve calls Detach and returns at once, and the
// relay runs on its own goroutines. Detach returns the context whose end
// cuts the relay (both connections are closed) and the function the relay
// calls once, when it has ended, to finish the request (end its session,
// say). Without a Detacher, Serve returns when the relay ends, and the
// request's context cuts it.
type Detacher interface {
	Detach() (stop context.Context, end func())
}

// PlainConn is implemented by a net.Conn wrapper whose reads and writes
// go straight to the connection it wraps, with no buffering of its own
// (the gateway's accept-side wrappers). A relay looks through it for the
// descriptor to wait on and for the half-close; through a *tls.Conn it
// waits on the descriptor beneath once the TLS connection holds nothing
// (see pump.above); through any other wrapper it reads the way a plain
// copy would.
type PlainConn interface {
	PlainConn() net.Conn
}

// Upgraded is implemented by a client connection wrapper that keeps state
// for the HTTP/1.1 requests crossing it (the edge's framing watcher),
// which a relayed WebSocket no longer needs. Before its pumps start, the
// relay calls Upgraded on each wrapper it finds through PlainConn.
type Upgraded interface {
	Upgraded()
}

// upgraded tells c's wrappers that c carries a relayed WebSocket now.
func upgraded(c net.Conn) {
	for c != nil {
		if u, ok := c.(Upgraded); ok {
			u.Upgraded()
		}
		pc, ok := c.(PlainConn)
		if !ok {
			return
		}
		c = pc.PlainConn()
	}
}

// relayBufSize is the size of a pump's pooled buffer.
const relayBufSize = 32 << 10

// upgradeBufSize is the size of the read and write buffers of an
// upgrade's upstream connection (upgradeTransport).
const upgradeBufSize = 1 << 10

// upgradeTransport is tr for WebSocket upgrades. An upgrade's upstream
// connection carries one request head out and the 101's head back before
// the relay takes it over (handOff), and is never pooled: the buffers the
// transport makes for it are garbage after the handshake. At 1 KiB, not
// the transport's 4 KiB, a burst of handshakes leaves 6 KiB less garbage
// each; a head longer than that is written and read in more pieces, and
// what the home sent behind its 101 waits in the socket, not the buffer.
func upgradeTransport(tr *http.Transport) *http.Transport {
	up := tr.Clone()
	up.ReadBufferSize, up.WriteBufferSize = upgradeBufSize, upgradeBufSize
	up.MaxIdleConnsPerHost = -1 // never pooled: nothing to keep
	return up
}

// errRelayOver ends ReverseProxy's handling of an upgrade the relay has
// taken over, or that failed after the client was hijacked: the
// ErrorHandler writes nothing for it.
var errRelayOver = errors.New("upgrade handed to the relay")

// errNoCloseWrite ends a pump whose destination cannot half-close, as
// ReverseProxy does for such connections.
var errNoCloseWrite = errors.New("connection cannot half-close")

// errFreshStack ends a pump's goroutine that relayed through TLS and is
// about to wait: the pump goes on on a new goroutine (relay.run).
var errFreshStack = errors.New("pump continues on a fresh goroutine")

// relayState is what a relay's handshake and pumps share.
type relayState struct {
	p *Proxy
	// w is the client's ResponseWriter, hijacked at the handoff and
	// dropped then.
	w http.ResponseWriter
	// dialled is the connection the transport used for the upgrade
	// (httptrace GotConn), whose descriptor the home's pump waits on.
	dialled net.Conn

	client net.Conn           // the hijacked client connection
	home   io.ReadWriteCloser // the 101 response's body
	pumps  [2]pump            // client to home (toHomeIdx), home to client
	// pending is what the client sent behind its handshake, written to
	// the home first.
	pending []byte
	left    atomic.Int32 // pumps still running
	closed  sync.Once
	// stop, when closed, cuts the relay (see Proxy.track).
	stop <-chan struct{}
	// end finishes the request when the relay ends (Detacher); done is
	// closed then when Serve waits instead.
	end  func()
	done chan struct{}
	// handedOff: the relay took the upgrade over (read by Serve, on the
	// handler's goroutine).
	handedOff bool
	// releasing: the connections are closing, no pump parks (guarded by
	// the proxy's parker).
	releasing bool
}

// pump copies one direction of a relay: the client's bytes to the home
// (the relay's pumps[toHomeIdx]) or the home's to the client. Its source,
// its destination and what it half-closes are the relay's (relay.ends);
// a pump holds only what it waits with, as a relay lives as long as its
// WebSocket.
type pump struct {
	// raw is src's descriptor, waited on before each read; nil when src
	// is neither a plain TCP or Unix connection nor TLS over one: the
	// pump then blocks in Read holding its buffer.
	raw syscall.RawConn
	// conn is the connection whose descriptor raw is (or the TLS
	// connection over it), on which waitFor sets its read deadline.
	conn net.Conn
	// token is the pump's entry in the parker while it is parked (0:
	// not parked; guarded by the parker).
	token uint64
	// parkedAt is when the pump last parked (Unix milliseconds,
	// truncated), set by park and read by the parker's wake-up.
	parkedAt uint32
	// waitStep sets how long the pump waits on its goroutine before it
	// parks (waitBeforePark).
	waitStep uint8
	// above: src can hold bytes that raw no longer shows (conn is TLS:
	// records read from the socket, decrypted or not, that no Read has
	// returned yet, some of them read by the server before the upgrade).
	// Before each wait on raw the pump drains conn, reading with a read
	// deadline in the past, which returns what it holds and then fails
	// without a system call.
	above bool
	// fresh: src or dst is TLS. crypto/tls's reads and writes grow a
	// goroutine's stack to 4 KiB or more, which a collection never takes
	// back below 4 KiB, so after relaying something the pump waits on a
	// new goroutine (2 KiB), not the one that relayed.
	fresh bool
	// drained: src was drained (above) just before this goroutine
	// started, so its first wait needs no drain.
	drained bool
	// drainFirst: what the transport buffered behind the 101 is read
	// first, through conn with a read deadline in the past, so that no
	// buffered byte waits for the descriptor to turn readable.
	drainFirst bool
	// inSet: raw's descriptor is in the parker's set (guarded by the
	// parker).
	inSet bool
}

// toHomeIdx is the index in a relay's pumps of the one that copies the
// client's bytes to the home.
const toHomeIdx = 0

// ends returns what pu reads, where it writes, and what it half-closes
// when its source ends (the destination's connection).
func (r *relay) ends(pu *pump) (src io.Reader, dst *frameWriter, half any) {
	if pu == &r.pumps[toHomeIdx] {
		return r.client, &r.toHome, r.home
	}
	return r.home, &r.toClient, r.client
}

// traceUpgrade records on rel the connection the transport hands out for
// req (the last one, after a retry).
func traceUpgrade(req *http.Request, rel *relay) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { rel.dialled = info.Conn }}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// handOff takes over the 101 response res of the WebSocket route's
// relay: it checks the protocol, hijacks the client, writes the 101 and
// starts the pumps. It returns errRelayOver when ReverseProxy must stop
// there (the relay runs, or the hijacked client was closed), or another
// error for the ErrorHandler to answer while nothing was written.
func (p *Proxy) handOff(res *http.Response, rel *relay) error {
	reqType, resType := upgradeType(res.Request.Header), upgradeType(res.Header)
	if !printableASCII(resType) {
		return fmt.Errorf("backend tried to switch to invalid protocol %q", resType)
	}
	if !strings.EqualFold(reqType, resType) {
		return fmt.Errorf("backend tried to switch protocol %q when %q was requested", resType, reqType)
	}
	home, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		return errors.New("101 switching protocols response with a body that cannot be written")
	}
	client, brw, err := http.NewResponseController(rel.w).Hijack()
	if err != nil {
		return fmt.Errorf("hijack on protocol switch: %w", err)
	}
	h := rel.w.Header()
	for k, vs := range res.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	res.Header, res.Body = h, nil // res.Write writes the headers only
	err = res.Write(brw)
	if err == nil {
		err = brw.Flush()
	}
	res.Body = http.NoBody // the home's connection is the relay's now, or closed below
	if err != nil {
		_ = client.Close()
		_ = home.Close()
		p.opts.Log.Debug("upgrade response not written", "err", err)
		return errRelayOver
	}
	// What the client sent behind its handshake sits in the server's
	// reader: it goes first, and the reader (and the writer) are dropped
	// with brw.
	var pending []byte
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Peek(n)
		pending = append([]byte(nil), b...)
	}
	p.startRelay(res.Request.Context(), rel, client, home, pending)
	return errRelayOver
}

// startRelay wires the relay's two sides and starts its pumps; with a
// Detacher the handler returns at once, else Serve waits for done.
// Without one, the relay ends with ctx, the request's context.
func (p *Proxy) startRelay(ctx context.Context, rel *relay, client net.Conn, home io.ReadWriteCloser, pending []byte) {
	rel.client, rel.home, rel.pending = client, home, pending
	upgraded(client)
	rel.toClient = frameWriter{w: client}
	rel.toHome = frameWriter{w: home, masked: true}
	stop := ctx
	if d := findDetacher(rel.w); d != nil {
		stop, rel.end = d.Detach()
	} else {
		rel.done = make(chan struct{})
	}
	rel.w = nil
	clientRaw, clientAbove := readinessOf(client)
	homeRaw, homeAbove := readinessOf(rel.dialled)
	anyTLS := clientAbove != nil || homeAbove != nil
	rel.pumps[toHomeIdx] = pump{raw: clientRaw, above: clientAbove != nil, fresh: anyTLS}
	toClient := &rel.pumps[1-toHomeIdx]
	*toClient = pump{raw: homeRaw, fresh: anyTLS}
	if clientRaw != nil {
		rel.pumps[toHomeIdx].conn = client
	}
	if homeRaw != nil {
		toClient.conn = rel.dialled
	}
	switch {
	case homeAbove != nil:
		// An https home's TLS connection is drained through the
		// body, the transport's reader first, before each wait.
		toClient.above = true
	case homeRaw != nil:
		toClient.drainFirst = true
	}
	rel.dialled = nil
	rel.handedOff = true
	rel.left.Store(2)
	p.track(rel, stop)
	go rel.run(&rel.pumps[0])
	go rel.run(&rel.pumps[1])
}

// findDetacher returns the Detacher w is or wraps, or nil.
func findDetacher(w http.ResponseWriter) Detacher {
	for w != nil {
		if d, ok := w.(Detacher); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// run runs one pump; the last one to end finishes the relay.
func (r *relay) run(pu *pump) {
	err := pu.copy(r)
	switch {
	case err == errParked:
		return // pu belongs to the parker now
	case err == errFreshStack:
		go r.run(pu)
		return
	case err != nil:
	case r.toClient.isClosed() && (pu != &r.pumps[toHomeIdx] || r.toHome.isClosed()):
		// The home ended its connection after a close frame went to
		// the client, or a close frame went each way: the WebSocket is
		// over, and toward the client the gateway is the server, which
		// closes the TCP connection first (RFC 6455 section 7.1.1).
		err = io.EOF
	default:
		_, _, half := r.ends(pu)
		err = closeWrite(half) // src ended: pass the half-close on
	}
	if err != nil {
		r.closeConns() // ends the other pump too
	}
	if r.left.Add(-1) == 0 {
		r.finish()
	}
}

// finish ends a relay whose pumps have both returned.
func (r *relay) finish() {
	r.closeConns()
	r.p.untrack(r)
	if r.end != nil {
		r.end()
	}
	if r.done != nil {
		close(r.done)
	}
}

// closeConns closes both connections, once.
func (r *relay) closeConns() {
	r.closed.Do(func() {
		// Parked pumps leave the parker while their descriptors are
		// still open, and run to find them closed.
		r.p.parker.release(r)
		_ = r.client.Close()
		_ = r.home.Close()
	})
}

// copy relays src to dst until src ends (nil) or a read or write fails,
// or until it parks (errParked: from then on pu is the parker's, and this
// goroutine must not touch it).
func (pu *pump) copy(r *relay) error {
	p := r.p
	src, dst, _ := r.ends(pu)
	// worked: this goroutine read or wrote something (see fresh).
	worked := false
	if pu == &r.pumps[toHomeIdx] && len(r.pending) > 0 {
		worked = true
		pending := r.pending
		r.pending = nil
		if _, err := dst.Write(pending); err != nil {
			return err
		}
	}
	if pu.drainFirst {
		worked = true
		pu.drainFirst = false
		eof, err := pu.drainBuffered(p, pu.conn, src, dst)
		if eof || err != nil {
			return err
		}
	}
	for {
		if pu.above && !pu.drained {
			eof, err := pu.drainBuffered(p, pu.conn, src, dst)
			if eof || err != nil {
				return err
			}
			worked = true
		}
		pu.drained = false
		if err := pu.wait(r, worked); err != nil {
			return err
		}
		bp := p.relayBuf()
		n, rerr := src.Read(bp[:])
		var werr error
		if n > 0 {
			_, werr = dst.Write(bp[:n])
		}
		p.relayBufDone(bp)
		worked = true
		switch {
		case werr != nil:
			return werr
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// wait returns once src has something to read, or errParked when pu has
// parked (nothing to read now): the parker runs it again when there is.
// Where pumps cannot park, or the parker refuses, it waits on raw with
// this goroutine, or ends it with errFreshStack when its stack may have
// grown in TLS work (worked).
func (pu *pump) wait(r *relay, worked bool) error {
	if pu.raw == nil {
		return nil // src blocks in Read
	}
	// Nothing is left above raw (drained just now, and only this pump
	// reads src): the goroutine that runs pu next reads at once.
	if canPark {
		// A relay in use waits on its goroutine for a while: a park
		// and its wake-up cost more CPU than the netpoller's wait.
		if ok, err := pu.waitFor(pu.waitBeforePark()); ok || err != nil {
			return err
		}
		pu.drained = true
		got, err := r.p.parker.park(r, pu)
		if got == parked {
			return errParked // pu is the parker's now
		}
		pu.drained = false
		if err != nil || got == readable {
			return err
		}
	}
	if worked && pu.fresh {
		pu.drained = true
		return errFreshStack
	}
	return waitReadable(pu.raw)
}

// A pump waits for its next read on its own goroutine before it parks:
// a park and its wake-up (an epoll_ctl, the set's loop woken, a new
// goroutine) cost more CPU than the netpoller's wait, while a goroutine
// that waits holds its stack, and a goroutine once made is kept by the
// runtime for good. How long it waits adapts to its relay. The wait
// starts at parkAfterMin, so that WebSockets that go quiet after their
// opening exchange (most of them, and every one of a burst of new ones)
// leave their goroutines soon. It doubles, up to parkAfterMax, each time
// the pump is woken less than parkAfterMax after it parked, so that a
// relay with a steady trickle of messages stays on its goroutine instead
// of paying a park per message; a park that lasted longer brings it back
// to parkAfterMin.
const (
	parkAfterMin = 25 * time.Millisecond
	parkAfterMax = 250 * time.Millisecond
)

// waitBeforePark is how long pu waits on its goroutine before it parks.
func (pu *pump) waitBeforePark() time.Duration {
	return min(parkAfterMin<<pu.waitStep, parkAfterMax)
}

// woken adapts pu's wait to the park that ends at now (nowMilli); the
// parker calls it as it takes pu out of the set for a read.
func (pu *pump) woken(now uint32) {
	if time.Duration(now-pu.parkedAt)*time.Millisecond >= parkAfterMax {
		pu.waitStep = 0
		return
	}
	if parkAfterMin<<pu.waitStep < parkAfterMax {
		pu.waitStep++
	}
}

// nowMilli is the time in Unix milliseconds, truncated to 32 bits: pumps
// compare two of them less than 49 days apart.
func nowMilli() uint32 { return uint32(time.Now().UnixMilli()) }

// waitFor waits up to d for src to have something to read, on this
// goroutine, with a read deadline on the connection beneath. It reports
// whether src is readable; a pump without that connection does not wait.
func (pu *pump) waitFor(d time.Duration) (bool, error) {
	if pu.conn == nil {
		return false, nil
	}
	if err := pu.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return false, err
	}
	err := waitReadable(pu.raw)
	if rerr := pu.conn.SetReadDeadline(time.Time{}); rerr != nil && err == nil {
		err = rerr
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, err
}

// drainBuffered relays what src holds above its descriptor (the
// transport's reader behind the 101, a TLS connection's records), reading
// with c's read deadline in the past so that only buffered bytes are
// read. It reports whether src ended.
func (pu *pump) drainBuffered(p *Proxy, c net.Conn, src io.Reader, dst *frameWriter) (eof bool, err error) {
	if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return false, err
	}
	bp := p.relayBuf()
	defer p.relayBufDone(bp)
	for {
		n, rerr := src.Read(bp[:])
		if n > 0 {
			if _, err := dst.Write(bp[:n]); err != nil {
				return false, err
			}
		}
		switch {
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			return false, c.SetReadDeadline(time.Time{})
		case rerr == io.EOF:
			return true, nil
		case rerr != nil:
			return false, rerr
		}
	}
}

// relayBuf takes a pump's buffer from the pool; relayBufDone gives it
// back. relayBufs counts the buffers out.
func (p *Proxy) relayBuf() *[relayBufSize]byte {
	p.relayBufs.Add(1)
	return p.bufs.get()
}

func (p *Proxy) relayBufDone(b *[relayBufSize]byte) {
	p.bufs.put(b)
	p.relayBufs.Add(-1)
}

// closeWrite half-closes c, looking through PlainConn wrappers.
func closeWrite(c any) error {
	for {
		switch t := c.(type) {
		case interface{ CloseWrite() error }:
			return t.CloseWrite()
		case PlainConn:
			c = t.PlainConn()
		default:
			return errNoCloseWrite
		}
	}
}

// readinessOf returns what a pump reading c waits on: the descriptor of a
// plain TCP or Unix connection (above nil), or the descriptor beneath a
// TLS connection and the connection to drain after each read (above, c
// itself). Both are nil when c is neither.
func readinessOf(c net.Conn) (raw syscall.RawConn, above net.Conn) {
	if raw = rawConnOf(c); raw != nil {
		return raw, nil
	}
	if tc := tlsOf(c); tc != nil {
		if raw = rawConnOf(tc.NetConn()); raw != nil {
			return raw, c
		}
	}
	return nil, nil
}

// tlsOf returns the *tls.Conn that c is or wraps through PlainConn
// wrappers, or nil.
func tlsOf(c net.Conn) *tls.Conn {
	for c != nil {
		switch t := c.(type) {
		case *tls.Conn:
			return t
		case PlainConn:
			c = t.PlainConn()
			continue
		}
		return nil
	}
	return nil
}

// rawConnOf returns the descriptor of c when c is a plain TCP or Unix
// connection, looking through PlainConn wrappers; nil otherwise.
func rawConnOf(c net.Conn) syscall.RawConn {
	for c != nil {
		switch t := c.(type) {
		case PlainConn:
			c = t.PlainConn()
			continue
		case *net.TCPConn:
			return rawOf(t)
		case *net.UnixConn:
			return rawOf(t)
		}
		return nil
	}
	return nil
}

func rawOf(c syscall.Conn) syscall.RawConn {
	if !canWaitReadable {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// upgradeType is the protocol h asks to switch to ("" for none).
func upgradeType(h http.Header) string {
	if !h1client.HeaderHasToken(h, "Connection", "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
