//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package h1client

import "syscall"

// peeker checks whether an idle connection is still open with nothing to
// read: a one-byte MSG_PEEK that does not wait finds no data (EAGAIN).
// Zero bytes is the upstream's close; a byte is an answer nobody asked
// for; either way the connection must not carry a request. It is made
// once per connection, so a check allocates nothing.
type peeker struct {
	raw   syscall.RawConn
	buf   [1]byte
	alive bool
	fn    func(fd uintptr) bool
}

func newPeeker(raw syscall.RawConn) *peeker {
	p := &peeker{raw: raw}
	p.fn = func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		p.alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	}
	return p
}

// check reports whether the connection is still open with nothing to
// read.
func (p *peeker) check() bool {
	p.alive = false
	err := p.raw.Read(p.fn)
	return err == nil && p.alive
}
