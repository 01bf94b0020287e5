//go:build linux && !race

package sockio

import (
	"syscall"
	"unsafe"
)

const supported = true

// sysRead and sysWrite are recv(2) and send(2) without the scheduler's
// system-call bookkeeping: on a non-blocking socket neither sleeps. The
// socket calls reach TCP directly; read(2) and write(2) go through the
// file layer first (a position lock and the file checks), which a socket
// does not use.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(n), errno
}

// sysWrite sends with MSG_NOSIGNAL: a peer that has gone is an EPIPE
// error, with no SIGPIPE for the runtime to field.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_NOSIGNAL, 0, 0)
	return int(n), errno
}

// sysPeek asks, without waiting, for one byte it leaves unread; only the
// error matters.
func sysPeek(fd uintptr) syscall.Errno {
	var b [1]byte
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno
}
