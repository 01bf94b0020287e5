package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"

	"github.com/wakegate/wakegate/internal/h1head"
)

// Go's HTTP server accepts a request that carries both Content-Length and
// Transfer-Encoding (it lets chunked win and drops Content-Length before a
// handler can see it). Such a request is refused here instead, since a
// server in front of or behind us may frame it differently. framingConn
// follows the requests that cross the connection (h1head.Framing: heads
// are read, bodies skipped by their framing) and flags a head that has
// both; the handler then answers 400 and closes the connection.
//
// When the framing of a body cannot be followed (a malformed chunk, a
// coding other than chunked, differing lengths; net/http refuses each of
// these too), the scanner no longer knows where the next head starts. It
// fails safe: the connection is flagged as well, so nothing more is served
// on it, rather than letting later heads go unchecked.

type framingConn struct {
	net.Conn
	// scan is nil once the connection carries a relayed WebSocket
	// (Upgraded): no head crosses it any more.
	scan *framingScan
}

// framingScan is the scanner and its verdict, which the handler reads.
type framingScan struct {
	f   h1head.Framing // the connection's reader alone touches it
	bad atomic.Pointer[error]
}

// PlainConn lets a WebSocket relay wait on the connection underneath
// (proxy.PlainConn): the watcher reads through, with no buffer.
func (c *framingConn) PlainConn() net.Conn { return c.Conn }

// Upgraded drops the scanner of a connection that carries a relayed
// WebSocket from now on (proxy.Upgraded): an idle one is kept for hours,
// and its bytes are frames, not heads. The relay calls it before any of
// its reads.
func (c *framingConn) Upgraded() { c.scan = nil }

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.scan != nil && c.scan.bad.Load() == nil {
		if ferr := c.scan.f.Scan(p[:n]); ferr != nil {
			c.scan.bad.Store(&ferr)
		}
	}
	return n, err
}

type framingKey struct{}

// FramingListener wraps accepted connections in the framing watcher.
type FramingListener struct{ net.Listener }

// Accept accepts the next connection, watched.
func (l FramingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Watch(c), nil
}

// Watch wraps c in the framing watcher (FramingListener does it for every
// connection it accepts). A connection that reports a TLS state (an
// HTTPS connection that h1serve handed on) keeps reporting it, so that
// net/http sets Request.TLS. A *tls.Conn is left as it is: it is one that
// h1serve passed on untouched (HTTP/2, whose own rules refuse
// Transfer-Encoding), and net/http must see its type.
func Watch(c net.Conn) net.Conn {
	switch x := c.(type) {
	case *tls.Conn:
		return c
	case interface{ ConnectionState() tls.ConnectionState }:
		return &tlsConn{framingConn: framingConn{Conn: c, scan: new(framingScan)}, state: x.ConnectionState()}
	}
	return &framingConn{Conn: c, scan: new(framingScan)}
}

// ConnContext stores the framing watcher in the connection's context (an
// HTTPS connection's too; tlsconn.go): an http.Server's ConnContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	switch fc := c.(type) {
	case *framingConn:
		return context.WithValue(ctx, framingKey{}, fc)
	case *tlsConn:
		return context.WithValue(ctx, framingKey{}, &fc.framingConn)
	}
	return ctx
}

// FramingProblem is what the framing watcher found wrong on the request's
// connection: nil when nothing, h1head.ErrConflict for a head with both
// framings, another error for framing it could not follow.
func FramingProblem(ctx context.Context) error {
	fc, _ := ctx.Value(framingKey{}).(*framingConn)
	if fc == nil || fc.scan == nil {
		return nil
	}
	if p := fc.scan.bad.Load(); p != nil {
		return *p
	}
	return nil
}

// IsConflict tells a head with both framings from framing that could not
// be followed.
func IsConflict(err error) bool { return errors.Is(err, h1head.ErrConflict) }
