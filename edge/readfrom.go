package edge

import (
	"io"
	"net"
)

// The public listener's connection wrappers pass ReadFrom on to the
// connection underneath. net/http's response writer sends a body of known
// length through its connection's ReadFrom when it has one, and a
// *net.TCPConn given a TCP source moves the bytes in the kernel (splice on
// Linux): the proxy's large bodies go from the upstream's socket to the
// client's without a copy through the gateway's memory. A wrapper without
// ReadFrom hides that, and the body is copied through a buffer.

// ReadFrom writes src to the client connection.
func (c *framingConn) ReadFrom(src io.Reader) (int64, error) { return readFromConn(c.Conn, src) }

// ReadFrom writes src to the client connection.
func (c *limitConn) ReadFrom(src io.Reader) (int64, error) { return readFromConn(c.Conn, src) }

// readFromConn writes src to c through c's ReadFrom when it has one, else
// through its Write.
func readFromConn(c net.Conn, src io.Reader) (int64, error) {
	if rf, ok := c.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{c}, src)
}

var (
	_ io.ReaderFrom = (*framingConn)(nil)
	_ io.ReaderFrom = (*limitConn)(nil)
)
