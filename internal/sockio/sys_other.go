//go:build !linux

package sockio

import "syscall"

const supported = false

func sysRead(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func sysWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

func sysPeek(uintptr) syscall.Errno { return syscall.ENOSYS }
