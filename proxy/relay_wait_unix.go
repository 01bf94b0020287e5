//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import "syscall"

// canWaitReadable: waitReadable parks on the netpoller.
const canWaitReadable = true

// waitReadable returns once rc has something to read (data, an EOF or an
// error), parking on the netpoller meanwhile with no buffer: the check is
// a one-byte peek that leaves the data in the socket. Go's sockets are
// non-blocking, so a peek with nothing to read fails with EAGAIN, and the
// raw read then waits for readiness and peeks again.
func waitReadable(rc syscall.RawConn) error {
	return rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		return err != syscall.EAGAIN
	})
}
