// Package h1serve serves plain HTTP/1.1 keep-alive requests on a loop of
// its own and hands every connection it does not take, at the first request
// it does not take, to net/http through a listener (Server.Handoff).
//
// A connection may be plain TCP or a *tls.Conn whose handshake is done
// (the listener does the handshakes): the loop serves HTTP/1.1 over it
// with Request.TLS set, and hands net/http, untouched, a TLS connection
// whose handshake is not done or that chose another protocol by ALPN
// (HTTP/2). A TLS connection handed off mid-way reports its handshake's
// state (ConnectionState), as a *tls.Conn would.
//
// net/http's server costs a plain proxied request about as much as the
// proxying does: a request parsed into fresh maps, a background read and a
// goroutine per request to notice a client that leaves, three read
// deadlines per request, a chunk writer. The loop here parses a plain head
// from its reader's buffer with one allocation for the names and values,
// sets one deadline per request, writes the response head straight into
// the connection's writer, and watches for a client that leaves only once
// a request has run for a while. What it takes is narrow on purpose (see
// head.go): upgrades, Expect, chunked or HTTP/1.0 requests, odd targets
// and anything malformed go to net/http, byte for byte, and net/http
// serves that connection from then on.
//
// A request body (DESIGN rule 26; body in conn.go) belongs to the handler
// and the goroutines it hands it to until the handler returns, one read at
// a time; the loop drains what is left when the response head goes out,
// under the same lock. Once the handler returned, the loop cuts a read
// still in progress and waits for it, and every later read gets
// http.ErrBodyReadAfterClose: the connection's pooled reader is read again,
// or pooled, only when nothing else can reach it.
package h1serve

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/internal/gopool"
)

// Server serves plain HTTP/1.1 connections. The zero value is not usable:
// set Handler, then call Handoff before Serve to get the listener that
// net/http must serve.
type Server struct {
	// Handler answers every request taken here.
	Handler http.Handler
	// ReadHeaderTimeout bounds the wait for a request head once the
	// connection is open or the head's first byte has come. Zero: no
	// bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection. Zero: no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes: a head longer than this (or than the 4 KiB reader)
	// goes to net/http, which applies its own limit. Zero: 4 KiB.
	MaxHeaderBytes int
	// BaseContext is the parent of every connection's context. Nil:
	// context.Background.
	BaseContext context.Context
	// ConnContext, if set, derives a connection's context, as
	// http.Server.ConnContext does.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ErrorLog receives handler panics and misuse of the writer. Nil:
	// the log package's standard logger.
	ErrorLog *log.Logger

	initOnce sync.Once
	handoff  *handoffListener
	closing  atomic.Bool
	date     dateCache
	served   atomic.Int64 // requests served here
	handed   atomic.Int64 // connections handed to net/http

	// workers are the serving goroutines (workers.go); workerIdle is how
	// long one waits for the next connection (zero: idleWorker).
	workers    *gopool.Pool[*conn]
	workerIdle time.Duration

	mu    sync.Mutex
	conns map[*conn]struct{}
	lns   []net.Listener
	done  chan struct{} // closed by Close
}

// readerSize is the size of a connection's reader and so the longest head
// served here.
const readerSize = 4 << 10

// watchTick is the period of the loop that starts watching, for a client
// that leaves, the connections whose request has run since the last tick.
const watchTick = 100 * time.Millisecond

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.conns = make(map[*conn]struct{})
		s.done = make(chan struct{})
		s.workers = newWorkers(s.workerIdle)
		s.handoff = &handoffListener{ch: make(chan net.Conn), done: make(chan struct{})}
	})
}

// Handoff returns the listener on which the connections that are not
// served here arrive, each with the bytes already read in front. Serve it
// with an http.Server that has the same handler. Closing it stops the
// hand-off: a connection that would have gone there is closed.
func (s *Server) Handoff(addr net.Addr) net.Listener {
	s.init()
	s.handoff.setAddr(addr)
	return s.handoff
}

// Stats is what Serve has done so far.
type Stats struct {
	Requests  int64 // requests served here
	HandedOff int64 // connections handed to net/http
	// Goroutines is how many serving goroutines were started: fewer
	// than the connections when idle ones took the later ones.
	Goroutines int64
	// IdleGoroutines is how many wait for a connection now.
	IdleGoroutines int
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.init()
	return Stats{Requests: s.served.Load(), HandedOff: s.handed.Load(),
		Goroutines: s.workers.Started(), IdleGoroutines: s.workers.Idle()}
}

// Serve accepts connections on ln until Shutdown or Close, and returns
// http.ErrServerClosed then, or the error of a listener closed by someone
// else. Other accept errors (out of descriptors, for one) are logged and
// retried after a pause that grows to a second.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.watchLoop(stop) })
	defer func() {
		close(stop)
		wg.Wait()
	}()
	var backoff time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors, a connection reset before it was
			// taken: the listener is fine and the next accept may work.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logf("h1serve: accept: %v; retrying in %v", err, backoff)
			if !s.sleep(backoff) {
				return http.ErrServerClosed
			}
			continue
		}
		backoff = 0
		c := s.newConn(rwc)
		if c == nil {
			_ = rwc.Close()
			continue
		}
		s.workers.Go(c)
	}
}

// Shutdown stops accepting, closes the idle connections, and waits for the
// others to end their response and close, or for ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closing.Store(true)
	s.closeListeners()
	wait := time.Millisecond
	for {
		if s.closeIdle() {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Close stops accepting and closes every connection served here.
func (s *Server) Close() error {
	s.init()
	s.closing.Store(true)
	s.closeListeners()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.rwc.Close()
	}
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return nil
}

func (s *Server) closeListeners() {
	s.workers.Halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	s.lns = nil
	_ = s.handoff.Close()
}

// closeIdle closes the connections waiting for a request and reports
// whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		w := c.st.Load()
		if w&phaseMask == phaseIdle && c.st.CompareAndSwap(w, w&^phaseMask|phaseClosed) {
			_ = c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

func (s *Server) shuttingDown() bool { return s.closing.Load() }

// sleep waits d, or less if Close is called; false then.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// watchLoop starts a watch on each connection whose request has been
// running since the previous tick.
func (s *Server) watchLoop(stop <-chan struct{}) {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for c := range s.conns {
			c.maybeWatch()
		}
		s.mu.Unlock()
	}
}

// handoffListener is the listener net/http serves: connections arrive on
// ch from the loops that hand them off.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr atomic.Value // net.Addr
}

func (l *handoffListener) setAddr(a net.Addr) {
	if a != nil {
		l.addr.Store(a)
	}
}

// Accept returns the next connection handed off.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept; connections handed off later are closed.
func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the listener the Server serves.
func (l *handoffListener) Addr() net.Addr {
	if a, ok := l.addr.Load().(net.Addr); ok {
		return a
	}
	return &net.TCPAddr{}
}

// give hands c to Accept; false when the listener is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// replayConn is a connection handed to net/http: the bytes the loop had
// read come first.
type replayConn struct {
	net.Conn
	buf []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		if len(c.buf) == 0 {
			c.buf = nil // a WebSocket keeps this connection for hours
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// tlsReplayConn is a TLS connection handed to net/http: it reports the
// handshake's state, from which net/http sets Request.TLS, and the
// edge's framing watcher knows it for an HTTPS connection.
type tlsReplayConn struct {
	*replayConn
	state *tls.ConnectionState // the loop's, shared: a relay keeps this for hours
}

// ConnectionState is the state of the connection's finished handshake.
func (c *tlsReplayConn) ConnectionState() tls.ConnectionState { return *c.state }

// PlainConn is the connection underneath once the replayed bytes are
// read (a WebSocket relay waits on its descriptor); nil before.
func (c *replayConn) PlainConn() net.Conn {
	if len(c.buf) > 0 {
		return nil
	}
	return c.Conn
}

// ReadFrom passes a body to the connection's ReadFrom (a splice from a
// TCP source), else copies it.
func (c *replayConn) ReadFrom(src io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, src)
}

// dateCache holds the Date value of the current second.
type dateCache struct{ p atomic.Pointer[dateStamp] }

type dateStamp struct {
	sec int64
	b   []byte
}

func (d *dateCache) get() []byte {
	now := time.Now()
	sec := now.Unix()
	if st := d.p.Load(); st != nil && st.sec == sec {
		return st.b
	}
	b := now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)
	d.p.Store(&dateStamp{sec: sec, b: b})
	return b
}

var (
	_ net.Listener  = (*handoffListener)(nil)
	_ io.ReaderFrom = (*replayConn)(nil)
)
