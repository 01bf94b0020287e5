package edge

import (
	"net"
	"syscall"
	"testing"
)

// TestListenKeepAlive: a connection the public listener accepts has the
// keep-alive probes and the TCP_NODELAY of Go's default listener, with
// the probes set on the listener alone (the kernel copies them).
func TestListenKeepAlive(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name       string
		level, opt int
		value      int
	}{
		{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 15},
		{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 15},
		{"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, 9},
		{"TCP_NODELAY", syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1},
	}
	err = rc.Control(func(fd uintptr) {
		for _, w := range want {
			got, err := syscall.GetsockoptInt(int(fd), w.level, w.opt)
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
				continue
			}
			if got != w.value {
				t.Errorf("%s = %d on the accepted connection, want %d", w.name, got, w.value)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
