package h1serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/internal/ctxhook"
	"github.com/wakegate/wakegate/internal/h1head"
	"github.com/wakegate/wakegate/internal/sockio"
)

// A connection's state word: the phase in the low bits, then whether the
// request may be watched and is, then a sequence number that changes with
// every request. The loop moves idle to active and back; Shutdown moves
// idle to closed; the watch loop sets watching on an active, watchable
// request it saw at the previous tick too.
const (
	phaseIdle   uint64 = 0
	phaseActive uint64 = 1
	phaseClosed uint64 = 2
	phaseMask   uint64 = 3
	watchable   uint64 = 4
	watching    uint64 = 8
	seqShift           = 4
)

// conn is one connection served by the loop.
type conn struct {
	s      *Server
	rwc    net.Conn
	remote string
	// tls is the state of the handshake of a TLS connection, which every
	// request's Request.TLS points to (as net/http's do); nil on plain TCP.
	tls *tls.ConnectionState
	// sock does the reads and writes on the socket itself when rwc is a
	// TCP connection, or a layer that passes them through; nil: rwc's.
	sock   *sockio.Conn
	ctx    context.Context
	cancel context.CancelFunc
	// reqBase is the parent of every request's context: ctx's values
	// without its cancellation, so that making a request's context does
	// not register it with ctx (a map insert and delete per request).
	// ctx ending reaches the request through the slot's watch on ctx
	// instead (hook.go connDone). It is ctx itself when ctx has a
	// deadline, which a request inherits.
	reqBase context.Context

	cr   connReader
	br   *bufio.Reader
	bw   *bufio.Writer
	head bytes.Buffer // a response head as WriteHeader fixed it

	connBuf []string
	pendBuf []byte

	// the write floor of the current response (floor.go) and the TCP
	// connection it writes to
	fl floor
	// wdl is the write deadline on the socket (setWriteDeadline)
	wdl    time.Time
	tcp    *net.TCPConn
	tcpRaw syscall.RawConn

	// idleDL is the deadline, in Unix nanoseconds, that idleDeadline
	// left on the socket; 0 once another read deadline was set since (by
	// the watch, or a handler, hence atomic).
	idleDL atomic.Int64

	st   atomic.Uint64
	seen uint64 // the watch loop's last look at st

	// set before a request turns active, read by its watch
	reqCancel context.CancelCauseFunc
	watchDone chan struct{}
	abortRead atomic.Bool
	gone      bool // the watch saw the client leave
	// hook is the request's one cheap context watch (hook.go)
	hook hookSlot
}

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

func (s *Server) newConn(rwc net.Conn) *conn {
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	ctx := context.WithValue(base, http.LocalAddrContextKey, rwc.LocalAddr())
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, rwc)
	}
	c := &conn{s: s, rwc: rwc, remote: rwc.RemoteAddr().String()}
	c.ctx, c.cancel = context.WithCancel(ctxhook.With(ctx, c))
	c.reqBase = c.ctx
	if _, ok := c.ctx.Deadline(); !ok {
		c.reqBase = context.WithoutCancel(c.ctx)
	}
	c.cr.c = c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		c.cancel()
		return nil
	}
	s.conns[c] = struct{}{}
	return c
}

func (c *conn) forget() {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.endHook()
	c.cancel()
}

// serve runs the connection's requests until it closes or is handed off.
func (c *conn) serve() {
	if tc, ok := c.rwc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		if !st.HandshakeComplete || (st.NegotiatedProtocol != "" && st.NegotiatedProtocol != "http/1.1") {
			// net/http does the handshake, and serves HTTP/2 (or what
			// else ALPN chose) on the *tls.Conn itself.
			c.forget()
			c.s.handed.Add(1)
			if !c.s.handoff.give(c.rwc) {
				_ = c.rwc.Close()
			}
			return
		}
		c.tls = &st
	} else if t := sockio.Beneath(c.rwc); t != nil {
		c.sock = sockio.New(t)
	}
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	handed := false
	defer func() {
		c.forget()
		if !handed {
			_ = c.rwc.Close()
		}
		c.br.Reset(nil)
		readerPool.Put(c.br)
		if c.bw != nil {
			c.bw.Reset(nil)
			writerPool.Put(c.bw)
		}
	}()
	maxHead := readerSize
	if m := c.s.MaxHeaderBytes; m > 0 && m < maxHead {
		maxHead = m
	}
	for first := true; ; first = false {
		ph, n, ok, err := c.readHead(first, maxHead)
		if err != nil {
			return
		}
		if !ok {
			handed = c.handOff()
			return
		}
		_, _ = c.br.Discard(n)
		if c.bw == nil {
			// Taken at the first request served here: a connection
			// handed off at once (a WebSocket's upgrade) never holds one.
			c.bw = writerPool.Get().(*bufio.Writer)
			c.bw.Reset(floorWriter{c})
		}
		if !c.serveOne(ph) {
			return
		}
	}
}

// readHead waits for the next request head. ok false: the head is not
// plain (or ended early) and the connection goes to net/http; err: the
// connection closes.
func (c *conn) readHead(first bool, maxHead int) (ph parsedHead, n int, ok bool, err error) {
	s := c.s
	if c.br.Buffered() == 0 && !c.cr.hasByte {
		d := s.IdleTimeout
		if first {
			d = s.ReadHeaderTimeout
		}
		switch {
		case d > 0 && !first:
			c.idleDeadline(d)
		case d > 0:
			_ = c.setReadDeadline(time.Now().Add(d))
		case !first:
			_ = c.setReadDeadline(time.Time{})
		}
		if _, err := c.br.Peek(1); err != nil {
			return ph, 0, false, err
		}
	}
	timed := first
	skipped := 0
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		// Empty lines before a request-line are ignored (RFC 9112 §2.2):
		// a client may end a body with an extra CRLF. They count against
		// the head's size, so a stream of them ends the connection.
		if k := leadingEmptyLines(buf); k > 0 {
			if skipped += k; skipped > maxHead {
				return ph, 0, false, errManyEmptyLines
			}
			_, _ = c.br.Discard(k)
			buf = buf[:0]
			if c.br.Buffered() > 0 {
				continue
			}
		}
		n = headEnd(buf)
		if n > maxHead || n < 0 {
			return ph, 0, false, nil
		}
		if n > 0 {
			break
		}
		if len(buf) >= maxHead {
			return ph, 0, false, nil
		}
		if !timed && s.ReadHeaderTimeout > 0 {
			_ = c.setReadDeadline(time.Now().Add(s.ReadHeaderTimeout))
			timed = true
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			if errors.Is(err, io.EOF) {
				return ph, 0, false, nil // what came is net/http's to answer
			}
			return ph, 0, false, err
		}
	}
	buf, _ := c.br.Peek(n)
	ph, ok = parseHead(buf)
	return ph, n, ok, nil
}

// idleDeadline bounds the wait for the next request by d from now, and by
// at most a slack more (d/8, at most a second): the deadline an earlier
// wait left is kept while it is within that, so a busy connection sets
// one about once a slack, not once a request.
func (c *conn) idleDeadline(d time.Duration) {
	want := time.Now().Add(d).UnixNano()
	slack := int64(min(d/8, time.Second))
	if dl := c.idleDL.Load(); dl >= want && dl-want <= slack {
		return
	}
	dl := want + slack
	_ = c.rwc.SetReadDeadline(time.Unix(0, dl))
	c.idleDL.Store(dl)
}

// setReadDeadline sets the socket's read deadline for anything but the
// wait for the next request: the idle deadline is then no longer on.
func (c *conn) setReadDeadline(t time.Time) error {
	err := c.rwc.SetReadDeadline(t)
	c.idleDL.Store(0)
	return err
}

// errManyEmptyLines closes a connection that sends more empty lines before
// a request-line than a whole head may hold.
var errManyEmptyLines = errors.New("too many empty lines before a request")

// leadingEmptyLines is the length of the CR and LF bytes at the start of b.
// A lone LF or CR is taken as an empty line too, as net/http and nginx do.
func leadingEmptyLines(b []byte) int {
	k := 0
	for k < len(b) && (b[k] == '\r' || b[k] == '\n') {
		k++
	}
	return k
}

// handOff gives the connection, with what was read of it, to net/http.
func (c *conn) handOff() bool {
	buf, _ := c.br.Peek(c.br.Buffered())
	replay := make([]byte, 0, len(buf)+1)
	if c.cr.hasByte {
		replay = append(replay, c.cr.b[0])
	}
	replay = append(replay, buf...)
	_ = c.setReadDeadline(time.Time{})
	c.forget()
	c.s.handed.Add(1)
	rc := &replayConn{Conn: c.rwc, buf: replay}
	if c.tls != nil {
		return c.s.handoff.give(&tlsReplayConn{replayConn: rc, state: c.tls})
	}
	return c.s.handoff.give(rc)
}

// serveOne runs the handler for one request and ends its response; false
// means the connection closes.
func (c *conn) serveOne(ph parsedHead) (reuse bool) {
	s := c.s
	var bd io.ReadCloser = http.NoBody
	var rb *body
	if ph.contentLength > 0 {
		rb = &body{br: c.br, left: ph.contentLength}
		bd = rb
		_ = c.setReadDeadline(time.Time{})
	}
	ctx, cancel := context.WithCancelCause(c.reqBase)
	c.begin(ctx, cancel)
	defer c.hook.end(cancel)
	r0 := http.Request{
		Method:        ph.method,
		URL:           ph.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        ph.header,
		Body:          bd,
		ContentLength: ph.contentLength,
		Host:          ph.host,
		RemoteAddr:    c.remote,
		RequestURI:    ph.target,
		Close:         ph.close,
		TLS:           c.tls,
	}
	req := r0.WithContext(ctx)
	if c.pendBuf == nil {
		c.pendBuf = make([]byte, 0, bufferBeforeHead)
	}
	w := &response{c: c, req: req, reqBody: rb, header: make(http.Header), contentLength: -1, pend: c.pendBuf[:0]}

	old := c.st.Load()
	seq := (old>>seqShift + 1) << seqShift
	active := seq | phaseActive
	if ph.contentLength == 0 && c.br.Buffered() == 0 {
		active |= watchable
	}
	c.reqCancel = cancel
	if !c.st.CompareAndSwap(old, active) {
		return false // closed by Shutdown while the request came in
	}
	s.served.Add(1)
	ok := c.runHandler(w, req)
	if rb != nil {
		rb.end(c) // nothing the handler left behind reads on
	}
	// Stop the watch, if one started, before anything reads again.
	if !c.st.CompareAndSwap(active, seq|phaseActive) {
		c.stopWatch()
		c.st.Store(seq | phaseActive)
	}
	if !ok {
		return false
	}
	reuse = w.finish()
	c.endFloor()
	c.hook.end(cancel)
	c.st.Store(seq | phaseIdle)
	return reuse && !c.gone
}

// runHandler calls the handler; false if it panicked (the connection
// closes, and the panic is logged unless it is http.ErrAbortHandler).
func (c *conn) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if e := recover(); e != nil {
			ok = false
			if e != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself is what panics
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logf("h1serve: panic serving %v: %v\n%s", c.remote, e, buf)
			}
		}
	}()
	c.s.Handler.ServeHTTP(w, req)
	return true
}

// maybeWatch starts a watch on the connection if its request was already
// active at the previous tick. Only the watch loop calls it.
func (c *conn) maybeWatch() {
	w := c.st.Load()
	prev := c.seen
	c.seen = w
	if w != prev || w&phaseMask != phaseActive || w&watchable == 0 || w&watching != 0 {
		return
	}
	done := make(chan struct{})
	c.watchDone = done
	if c.st.CompareAndSwap(w, w|watching) {
		go c.watch(done)
	}
}

// watch reads from the idle client while its request runs: a byte is the
// next request, kept for the reader; an error is the client leaving, which
// cancels the request.
func (c *conn) watch(done chan struct{}) {
	defer close(done)
	_ = c.setReadDeadline(time.Time{})
	// stopWatch sets abortRead before it sets a past deadline: seen
	// false here, the clear above came first and the deadline will end
	// the read.
	if c.abortRead.Load() {
		return
	}
	n, err := c.rwc.Read(c.cr.b[:])
	if n == 1 {
		c.cr.hasByte = true
		return
	}
	if c.abortRead.Load() {
		return
	}
	c.gone = true
	c.reqCancel(fmtGone(err))
	c.hook.fire()
}

// stopWatch ends a watch that started and waits for it.
func (c *conn) stopWatch() {
	c.abortRead.Store(true)
	_ = c.setReadDeadline(aLongTimeAgo)
	<-c.watchDone
	c.abortRead.Store(false)
	_ = c.setReadDeadline(time.Time{})
}

var aLongTimeAgo = time.Unix(1, 0)

// errClientGone is the cause of a request whose client closed its
// connection while the handler ran.
var errClientGone = errors.New("client closed the connection")

func fmtGone(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return errClientGone
	}
	return errors.Join(errClientGone, err)
}

// connReader reads the connection, the byte a watch read first.
type connReader struct {
	c       *conn
	hasByte bool
	b       [1]byte
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.hasByte && len(p) > 0 {
		p[0] = r.b[0]
		r.hasByte = false
		return 1, nil
	}
	if r.c.sock != nil {
		return r.c.sock.Read(p)
	}
	return r.c.rwc.Read(p)
}

// body is a request body of known length, read from the connection's
// reader, which is pooled and serves the next request once this one is
// over. Who may read it, and until when (DESIGN rule 26):
//
//   - the handler, and any goroutine it hands the body to, until the
//     handler returns; reads are serialized by mu, so two readers (a proxy's
//     body writer and the drain below) never read the connection at once;
//   - the loop, when the response head goes out (drain: what is left, up to
//     maxPostHandlerRead, so the connection can take the next request);
//   - nobody after the handler returned: end takes the body back, cutting a
//     read still in progress with a read deadline in the past and waiting
//     for it, and every later Read gets http.ErrBodyReadAfterClose, never
//     bytes of the connection's next request. Only then does the loop read
//     again, or give the reader back to the pool.
//
// A read that failed (or was cut) leaves what is on the wire unknown: the
// connection closes after the response.
type body struct {
	mu     sync.Mutex // held by every read of br, and by drain and end
	br     *bufio.Reader
	left   int64
	eof    bool  // read to its end
	err    error // a read failed: later reads get it, the connection closes
	over   atomic.Bool
	closed atomic.Bool // Close was called
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over.Load() || b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := h1head.ReadBody(b.br, p, &b.left)
	switch {
	case errors.Is(err, io.EOF):
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

// Close ends the handler's reads; it does not wait for one in progress
// (end does).
func (b *body) Close() error {
	b.closed.Store(true)
	return nil
}

// end takes the body back once the handler has returned (see body). A
// read in progress is cut through c's read deadline; the connection then
// closes after the response.
func (b *body) end(c *conn) {
	b.over.Store(true) // a read waiting for mu gives up
	if !b.mu.TryLock() {
		_ = c.setReadDeadline(aLongTimeAgo)
		b.mu.Lock()
		if b.err == nil && !b.eof {
			b.err = errBodyCut
		}
	}
	b.mu.Unlock()
}

// errBodyCut is the state of a body whose read was still running when its
// handler returned.
var errBodyCut = errors.New("h1serve: request body read cut: the handler had returned")

// drain reads what is left of the body, up to maxPostHandlerRead, so that
// the connection can take the next request. It reports whether it can:
// false when more is left, a read failed, or the handler closed the body
// before its end.
func (b *body) drain() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.eof:
		return true
	case b.err != nil, b.closed.Load(), b.left >= maxPostHandlerRead:
		return false
	}
	_, err := io.CopyN(io.Discard, lockedBody{b}, maxPostHandlerRead+1)
	return err == io.EOF
}

// lockedBody reads a body whose mu is held.
type lockedBody struct{ b *body }

func (l lockedBody) Read(p []byte) (int, error) { return l.b.readLocked(p) }
