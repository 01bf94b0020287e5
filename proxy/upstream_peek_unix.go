//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import "syscall"

// peekAlive reports whether an idle connection is still open with nothing
// to read: a one-byte MSG_PEEK that does not wait finds no data (EAGAIN).
// Zero bytes is the upstream's close; a byte is an answer nobody asked
// for; either way the connection must not carry a request.
func peekAlive(raw syscall.RawConn) bool {
	var buf [1]byte
	alive := false
	err := raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
