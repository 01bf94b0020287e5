package gateway

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
)

// Go's HTTP server accepts a request that carries both Content-Length and
// Transfer-Encoding (it lets chunked win and drops Content-Length before a
// handler can see it). Such a request is refused here instead, since a
// server in front of or behind us may frame it differently. framingConn
// watches the header lines that cross the connection and flags one that has
// both; the handler then answers 400 and closes the connection.

type framingConn struct {
	net.Conn
	// state of the line scanner
	atLineStart bool
	line        [24]byte // the start of the current line, lower-cased
	lineLen     int
	sawCL       bool
	sawTE       bool
	conflict    atomic.Bool
}

// PlainConn lets a WebSocket relay wait on the connection underneath
// (proxy.PlainConn): the watcher reads through, with no buffer.
func (c *framingConn) PlainConn() net.Conn { return c.Conn }

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.scan(p[:n])
	}
	return n, err
}

// scan looks at the first bytes of each line. A blank line ends a header
// block and resets what was seen. Body bytes are scanned too; a body whose
// lines look like both framing headers in one block is refused as well,
// which only a request smuggling attempt produces.
func (c *framingConn) scan(b []byte) {
	for len(b) > 0 {
		if !c.atLineStart && c.lineLen == len(c.line) {
			// Past the part of the line that matters: skip to its end.
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				return
			}
			b = b[i+1:]
			c.endLine()
			continue
		}
		ch := b[0]
		b = b[1:]
		if ch == '\n' {
			c.endLine()
			continue
		}
		c.atLineStart = false
		if c.lineLen < len(c.line) {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			c.line[c.lineLen] = ch
			c.lineLen++
		}
	}
}

func (c *framingConn) endLine() {
	l := c.line[:c.lineLen]
	switch {
	case len(l) == 0 || (len(l) == 1 && l[0] == '\r'):
		c.sawCL, c.sawTE = false, false
	case bytes.HasPrefix(l, []byte("content-length:")):
		c.sawCL = true
	case bytes.HasPrefix(l, []byte("transfer-encoding:")):
		c.sawTE = true
	}
	if c.sawCL && c.sawTE {
		c.conflict.Store(true)
	}
	c.lineLen = 0
	c.atLineStart = true
}

type framingKey struct{}

// framingListener wraps accepted connections in framingConn.
type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c, atLineStart: true}, nil
}

// connContext stores the framing watcher in the connection's context (an HTTPS
// connection's too; tlsconn.go).
func connContext(ctx context.Context, c net.Conn) context.Context {
	switch fc := c.(type) {
	case *framingConn:
		return context.WithValue(ctx, framingKey{}, fc)
	case *tlsConn:
		return context.WithValue(ctx, framingKey{}, &fc.framingConn)
	}
	return ctx
}

func framingConflict(ctx context.Context) bool {
	fc, _ := ctx.Value(framingKey{}).(*framingConn)
	return fc != nil && fc.conflict.Load()
}
