package edge

import (
	"net"
	"syscall"
)

// listenConfig sets the keep-alive options on the listening socket, which
// Linux copies to every socket it accepts, and leaves them off the accept
// path (KeepAlive negative).
func listenConfig() *net.ListenConfig {
	return &net.ListenConfig{
		KeepAlive: -1,
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				opts := []struct{ level, name, value int }{
					{syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, int(keepAliveIdle.Seconds())},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, int(keepAliveInterval.Seconds())},
					{syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, keepAliveCount},
				}
				for _, o := range opts {
					if serr = syscall.SetsockoptInt(int(fd), o.level, o.name, o.value); serr != nil {
						return
					}
				}
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
}
