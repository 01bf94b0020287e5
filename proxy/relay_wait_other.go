//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

import "syscall"

// canWaitReadable: no readiness wait here; pumps block in Read holding
// their buffer.
const canWaitReadable = false

func waitReadable(syscall.RawConn) error { return nil }
