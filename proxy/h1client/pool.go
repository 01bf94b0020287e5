package h1client

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/internal/sockio"
)

// MaxResponseHeaderBytes bounds the status line and headers of an upstream
// response, as net/http's Transport does by default.
const MaxResponseHeaderBytes = 10 << 20

// ErrHeaderTooLarge is an upstream whose response headers pass
// MaxResponseHeaderBytes.
var ErrHeaderTooLarge = errors.New("upstream response headers exceed the limit")

// upConn is one plain HTTP/1.1 connection to an upstream, owned by one
// round trip at a time, or idle in its pool. Its reader stays with it (it
// may hold bytes of the next response); a writer is borrowed from the
// pool's for each request.
type upConn struct {
	net.Conn
	key  string
	br   *bufio.Reader
	peek *peeker // the liveness check of an idle connection; nil: none

	// written counts the bytes written since the round trip began, so a
	// failed write can tell whether anything reached the upstream.
	written int64
	// headerLeft is how many more bytes the response heads may take, 1xx
	// heads and the final one together; negative while the body is read
	// (no limit).
	headerLeft int64
	// answered is set by the first byte read since the round trip began:
	// the upstream has begun an answer, so the request is never sent again.
	answered  bool
	reused    bool      // served an earlier request
	idleSince time.Time // when it went into the pool
	// interrupt sets a deadline in the past, which cuts a blocked read or
	// write at once (the exchange's context watch); made once per
	// connection.
	interrupt func()
	// sock does the reads and writes on the socket itself when the dial
	// gave a TCP connection; nil: Conn's.
	sock *sockio.Conn
	// rdl is the read deadline the exchanges left on the socket
	// (headerDeadline); zero: none.
	rdl time.Time
	// await has the next write wait for the answer as it ends
	// (sockio.Conn.WriteAwait), so that the first read of the answer
	// finds it; awaited says that it did.
	await, awaited bool
}

// headerSlack is how much later than its timeout d a wait for a response
// head may be cut: a connection keeps the deadline an earlier exchange
// set while it is no sooner than d away and no later than d and the
// slack, so a busy one sets a deadline about once a slack, not twice a
// request.
func headerSlack(d time.Duration) time.Duration { return min(d/8, time.Second) }

// headerDeadline bounds the wait for a response head from now by d, and
// by at most the slack more.
func (c *upConn) headerDeadline(now time.Time, d time.Duration) {
	want := now.Add(d)
	if !c.rdl.Before(want) && c.rdl.Sub(want) <= headerSlack(d) {
		return
	}
	c.rdl = want.Add(headerSlack(d))
	_ = c.SetReadDeadline(c.rdl)
}

// clearDeadline takes the read deadline off, for a body of unknown
// length or one not read yet, and for an idle connection whose deadline
// has passed (a peek past it would fail).
func (c *upConn) clearDeadline() {
	if !c.rdl.IsZero() {
		c.rdl = time.Time{}
		_ = c.SetReadDeadline(time.Time{})
	}
}

// Write writes to the connection, counting the bytes.
func (c *upConn) Write(p []byte) (int, error) {
	var n int
	var err error
	switch {
	case c.sock != nil && c.await:
		c.await = false
		n, c.awaited, err = c.sock.WriteAwait(p)
	case c.sock != nil:
		n, err = c.sock.Write(p)
	default:
		n, err = c.Conn.Write(p)
	}
	c.written += int64(n)
	return n, err
}

// Read reads from the connection, within the header limit while headers
// are read.
func (c *upConn) Read(p []byte) (int, error) {
	if c.headerLeft < 0 {
		return c.read(p)
	}
	if c.headerLeft == 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(p)) > c.headerLeft {
		p = p[:c.headerLeft]
	}
	n, err := c.read(p)
	c.headerLeft -= int64(n)
	if n > 0 {
		c.answered = true
	}
	return n, err
}

func (c *upConn) read(p []byte) (int, error) {
	if c.sock != nil {
		return c.sock.Read(p)
	}
	return c.Conn.Read(p)
}

// Pool keeps idle upstream connections per host (LIFO, at most
// maxIdle each) and closes those idle past idleTimeout with one timer,
// armed only while some connection is idle.
type Pool struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration
	writers     sync.Pool // *bufio.Writer

	mu     sync.Mutex
	idle   map[string][]*upConn
	nidle  int
	sweep  *time.Timer // armed while nidle > 0 and idleTimeout > 0
	closed bool
}

func NewPool(dial func(ctx context.Context, network, addr string) (net.Conn, error),
	maxIdle int, idleTimeout time.Duration) *Pool {
	if maxIdle <= 0 {
		maxIdle = 2 // net/http's default per host
	}
	return &Pool{dial: dial, maxIdle: maxIdle, idleTimeout: idleTimeout, idle: map[string][]*upConn{}}
}

// get returns an idle connection to addr that is still open, or dials a
// new one.
func (p *Pool) get(ctx context.Context, addr string) (*upConn, error) {
	for {
		c := p.takeIdle(addr)
		if c == nil {
			break
		}
		if !c.rdl.IsZero() && !time.Now().Before(c.rdl) {
			c.clearDeadline()
		}
		if c.alive() {
			c.reused = true
			return c, nil
		}
		_ = c.Close()
	}
	return p.dialNew(ctx, addr)
}

// dialNew dials a fresh connection to addr.
func (p *Pool) dialNew(ctx context.Context, addr string) (*upConn, error) {
	nc, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &upConn{Conn: nc, key: addr}
	c.interrupt = func() { _ = c.SetDeadline(aLongTimeAgo) }
	if tc, ok := nc.(*net.TCPConn); ok {
		c.sock = sockio.New(tc)
	}
	if sc, ok := nc.(syscall.Conn); ok && c.sock == nil {
		if raw, err := sc.SyscallConn(); err == nil {
			c.peek = newPeeker(raw)
		}
	}
	c.br = bufio.NewReaderSize(c, 4<<10)
	return c, nil
}

func (p *Pool) takeIdle(addr string) *upConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[addr]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	p.idle[addr] = list[:len(list)-1]
	p.nidle--
	return c
}

// put gives c back to the pool after a complete exchange, or closes it
// when the pool is full or closed.
func (p *Pool) put(c *upConn) {
	c.idleSince = time.Now()
	p.mu.Lock()
	list := p.idle[c.key]
	if p.closed || len(list) >= p.maxIdle {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.idle[c.key] = append(list, c)
	p.nidle++
	if p.idleTimeout > 0 && p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.sweepIdle)
	}
	p.mu.Unlock()
}

// sweepIdle closes the connections idle past the timeout and re-arms the
// timer while some remain.
func (p *Pool) sweepIdle() {
	cutoff := time.Now().Add(-p.idleTimeout)
	var stale []*upConn
	p.mu.Lock()
	p.sweep = nil
	if p.closed {
		p.mu.Unlock()
		return
	}
	oldest := time.Time{}
	for key, list := range p.idle {
		keep := list[:0]
		for _, c := range list {
			if c.idleSince.Before(cutoff) {
				stale = append(stale, c)
				continue
			}
			if oldest.IsZero() || c.idleSince.Before(oldest) {
				oldest = c.idleSince
			}
			keep = append(keep, c)
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(p.idle, key)
		} else {
			p.idle[key] = keep
		}
	}
	p.nidle -= len(stale)
	if p.nidle > 0 {
		p.sweep = time.AfterFunc(time.Until(oldest.Add(p.idleTimeout)), p.sweepIdle)
	}
	p.mu.Unlock()
	for _, c := range stale {
		_ = c.Close()
	}
}

// Close closes every idle connection and stops the timer; connections in
// use are closed when their exchange ends.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.CloseIdle()
}

// CloseIdle closes the idle connections and lets the pool keep working.
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = map[string][]*upConn{}
	p.nidle = 0
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.Close()
		}
	}
}

// writer returns a pooled bufio.Writer writing to c.
func (p *Pool) writer(c *upConn) *bufio.Writer {
	if bw, ok := p.writers.Get().(*bufio.Writer); ok {
		bw.Reset(c)
		return bw
	}
	return bufio.NewWriterSize(c, 4<<10)
}

// putWriter gives bw back.
func (p *Pool) putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	p.writers.Put(bw)
}

// alive reports whether an idle connection can carry a request: nothing
// unread is buffered and the upstream has neither closed it nor sent
// anything unasked.
func (c *upConn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	switch {
	case c.sock != nil:
		return c.sock.Idle()
	case c.peek != nil:
		return c.peek.check()
	}
	return true
}

// DropIdle closes the idle connections to addr, leaving the others. A
// home that stopped closed its end of them: they would sit half-closed
// until the idle timeout.
func (p *Pool) DropIdle(addr string) int {
	p.mu.Lock()
	list := p.idle[addr]
	delete(p.idle, addr)
	p.nidle -= len(list)
	p.mu.Unlock()
	for _, c := range list {
		_ = c.Close()
	}
	return len(list)
}

// Idle is how many connections the pool holds idle.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nidle
}
