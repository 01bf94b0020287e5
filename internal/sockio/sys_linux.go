//go:build linux && !race

package sockio

import (
	"syscall"
	"unsafe"
)

const supported = true

// sysRead and sysWrite are read(2) and write(2) without the scheduler's
// system-call bookkeeping: on a non-blocking socket neither sleeps.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	return int(n), errno
}

// sysPeek asks, without waiting, for one byte it leaves unread; only the
// error matters.
func sysPeek(fd uintptr) syscall.Errno {
	var b [1]byte
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno
}
