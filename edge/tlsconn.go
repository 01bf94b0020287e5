package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/internal/gopool"
	"github.com/wakegate/wakegate/internal/sockio"
)

// The HTTPS listener keeps the framing check (framing.go) above TLS. Go's
// HTTP server handles a *tls.Conn itself and would read the decrypted
// bytes where no wrapper sees them, so TLSListener does the handshake
// first, in a goroutine per connection (bounded by tls.handshake_timeout,
// so a slow client holds no one else up; one that did a handshake waits a
// while for the next, with the stack the handshake grew: internal/gopool),
// and then hands the server:
//   - for HTTP/2 (ALPN h2), the *tls.Conn itself: the server's own HTTP/2
//     serves it, with the limits of Server.HTTP2; HTTP/2 has its own
//     framing rules (Go refuses Transfer-Encoding there);
//   - for HTTP/1.1, a tlsConn: the framing watcher over the *tls.Conn,
//     which reports the TLS state so that the server still sets
//     Request.TLS; or, for a server that checks framing itself (the
//     gateway's HTTP/1.1 loop, h1serve, whose hand-offs to net/http
//     FramingListener watches), the *tls.Conn as it is.
// A connection that only answered an ACME TLS-ALPN-01 challenge is closed
// after its handshake.

// TLSListener hands out connections whose TLS handshake is done.
type TLSListener struct {
	inner   net.Listener
	conf    *tls.Config
	timeout time.Duration
	failed  prometheus.Counter // handshakes that did not complete
	watch   bool               // HTTP/1.1 connections come watched

	ready     chan net.Conn
	errs      chan error
	ctx       context.Context // ends with Close: pending handshakes stop
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop
	shakers   *gopool.Pool[net.Conn]
}

// Handshakes are CPU work: a few goroutines waiting for the next one keep
// up with as many as the CPUs can do.
const (
	maxIdleShakers = 32
	idleShaker     = 2 * time.Second
)

// NewTLSListener starts accepting on inner, with handshakes bounded by
// timeout and counted in failed when they do not complete; Close stops it
// and waits. watch: HTTP/1.1 connections come in the framing watcher
// (for net/http); otherwise as the *tls.Conn (for h1serve).
func NewTLSListener(inner net.Listener, conf *tls.Config, timeout time.Duration, failed prometheus.Counter, watch bool) *TLSListener {
	l := &TLSListener{inner: inner, conf: conf, timeout: timeout, failed: failed, watch: watch,
		ready: make(chan net.Conn), errs: make(chan error)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.shakers = gopool.New(l.handshake, maxIdleShakers, idleShaker)
	l.wg.Go(l.acceptLoop)
	return l
}

func (l *TLSListener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errs <- err:
			case <-l.ctx.Done():
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		l.shakers.Go(c)
	}
}

// handshake runs c's TLS handshake and queues the connection for Accept.
func (l *TLSListener) handshake(c net.Conn) {
	tc := tls.Server(rawSocket(c), l.conf)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		l.failed.Inc()
		_ = tc.Close()
		return
	}
	var out net.Conn = tc
	switch st := tc.ConnectionState(); st.NegotiatedProtocol {
	case "h2":
	case "acme-tls/1":
		_ = tc.Close()
		return
	default:
		if l.watch {
			out = &tlsConn{framingConn: framingConn{Conn: tc, scan: new(framingScan)}, state: st}
		}
	}
	select {
	case l.ready <- out:
	case <-l.ctx.Done():
		_ = tc.Close()
	}
}

// Accept returns the next connection whose handshake is done.
func (l *TLSListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errs:
		return nil, err
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting, ends pending handshakes and waits for them.
func (l *TLSListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.cancel()
		err = l.inner.Close()
		l.wg.Wait()
		l.shakers.Halt()
		l.shakers.Wait()
	})
	return err
}

// Addr is the inner listener's address.
func (l *TLSListener) Addr() net.Addr { return l.inner.Addr() }

// socketConn is a connection whose reads and writes are its socket's,
// made with sockio (no hand-off of the processor for a call that never
// sleeps) instead of through the file layers of net.Conn: what TLS reads
// and writes beneath every HTTPS request. Close, the read deadline and
// the addresses stay those of the connection it wraps, and so do the
// listener's wrappers (a limitConn gives its place back on Close).
//
// The write deadline goes on the socket only when a write has to wait
// for room, or has passed already. A response's minimum rate sets one
// for every response and lifts it at the next request (proxy/minrate,
// which must keep each deadline final on TLS: a *tls.Conn whose write
// timed out is spoilt), and each of those is a timer of the runtime set
// and stopped, where the kernel takes almost every response at once. A
// write that does not wait then costs none, and one that waits waits
// under the deadline asked for, as on net.Conn.
type socketConn struct {
	net.Conn
	sock *sockio.Conn

	wmu sync.Mutex
	// wdl is the write deadline asked for (SetWriteDeadline).
	wdl time.Time
	// onSock: the socket has a write deadline on (wdl, once a write
	// waited or it had passed); every later one then goes on at once,
	// until a zero one takes it off.
	onSock bool
	// waiting: a write waits for room now; a deadline set meanwhile goes
	// on at once, so it ends that wait as it would on net.Conn.
	waiting bool
}

// rawSocket returns c with its reads and writes made on its socket, where
// every layer down to the TCP connection reads and writes through
// (ReadsWritesThrough) and this platform has the calls; else c.
func rawSocket(c net.Conn) net.Conn {
	if s := sockio.New(sockio.Beneath(c)); s != nil {
		return &socketConn{Conn: c, sock: s}
	}
	return c
}

func (c *socketConn) Read(p []byte) (int, error) { return c.sock.Read(p) }

// Write writes p, first without waiting; only the rest, if the socket's
// buffer filled, waits, with the write deadline on the socket.
func (c *socketConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	if !c.onSock && !c.wdl.IsZero() && !time.Now().Before(c.wdl) {
		c.putDeadline() // passed: the write fails as on net.Conn
	}
	c.wmu.Unlock()
	n, err := c.sock.TryWrite(p)
	if err != nil || n == len(p) {
		return n, err
	}
	c.wmu.Lock()
	if !c.onSock && !c.wdl.IsZero() {
		c.putDeadline()
	}
	c.waiting = true
	c.wmu.Unlock()
	m, err := c.sock.Write(p[n:])
	c.wmu.Lock()
	c.waiting = false
	c.wmu.Unlock()
	return n + m, err
}

// putDeadline puts wdl on the socket; c.wmu is held.
func (c *socketConn) putDeadline() {
	if c.Conn.SetWriteDeadline(c.wdl) == nil {
		c.onSock = !c.wdl.IsZero()
	}
}

// SetWriteDeadline keeps t for the next write that has to wait, and puts
// it on the socket at once when a write waits now, the socket has a
// deadline on already, or t has passed.
func (c *socketConn) SetWriteDeadline(t time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wdl = t
	if !c.onSock && !c.waiting && (t.IsZero() || time.Now().Before(t)) {
		return nil
	}
	err := c.Conn.SetWriteDeadline(t)
	if err == nil {
		c.onSock = !t.IsZero()
	}
	return err
}

// SetDeadline sets the read deadline on the socket and the write
// deadline as SetWriteDeadline does.
func (c *socketConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// PlainConn lets a WebSocket relay wait on the connection underneath
// (proxy.PlainConn).
func (c *socketConn) PlainConn() net.Conn { return c.Conn }

// ReadsWritesThrough says that c reads and writes the connection beneath
// unchanged.
func (c *socketConn) ReadsWritesThrough() net.Conn { return c.Conn }

// tlsConn is an HTTP/1.1 connection over TLS: the framing watcher over the
// *tls.Conn, reporting the handshake's state (http.Server reads it for
// Request.TLS).
type tlsConn struct {
	framingConn
	state tls.ConnectionState
}

// ConnectionState is the state of the finished handshake.
func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.state }

// resetGuard closes an HTTP/2 connection whose client cancels streams
// faster than its allowance (a rapid-reset flood): Go's server already
// bounds the handlers running at once; this bounds the rate.
type resetGuard struct {
	conn    net.Conn
	limiter *rate.Limiter
}

// reset counts one cancelled stream; past the allowance it closes the
// connection and reports true.
func (g *resetGuard) reset() bool {
	if g.limiter.Allow() {
		return false
	}
	_ = g.conn.Close()
	return true
}

type resetGuardKey struct{}

// TLSConnContext is the ConnContext of an HTTPS server fed by a
// TLSListener: an HTTP/2 connection (a *tls.Conn) gets a guard that closes
// it past resets cancelled streams a second (StreamCancelled), an
// HTTP/1.1 one the framing watcher (ConnContext).
func TLSConnContext(resets rate.Limit) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		if tc, ok := c.(*tls.Conn); ok {
			return context.WithValue(ctx, resetGuardKey{}, &resetGuard{conn: tc, limiter: rate.NewLimiter(resets, 10*int(resets))})
		}
		return ConnContext(ctx, c)
	}
}

// StreamCancelled counts a stream of ctx's HTTP/2 connection that its
// client cancelled; past the allowance it closes the connection and
// reports true. Nothing for a connection without a guard.
func StreamCancelled(ctx context.Context) bool {
	g, _ := ctx.Value(resetGuardKey{}).(*resetGuard)
	return g != nil && g.reset()
}
