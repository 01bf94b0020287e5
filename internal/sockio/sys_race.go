//go:build linux && race

package sockio

import "syscall"

const supported = true

// Under the race detector the calls go through package syscall's Read
// and Write, which tell the detector what the kernel read and wrote. On
// a socket they do what recv(2) and send(2) do; what differs from the
// raw calls is the scheduler's bookkeeping, the file layer's checks and
// the SIGPIPE a write to a gone peer raises (the runtime ignores it for
// a socket, so the write still fails with EPIPE).
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	return errnoOf(syscall.Read(int(fd), p))
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	return errnoOf(syscall.Write(int(fd), p))
}

func errnoOf(n int, err error) (int, syscall.Errno) {
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}

func sysPeek(fd uintptr) syscall.Errno {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	if err != nil {
		return err.(syscall.Errno)
	}
	return 0
}
