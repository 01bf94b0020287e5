package edge

import (
	"context"
	"net"
	"time"
)

// Keep-alive probes of the public listener's connections: Go's defaults
// for an accepted connection (the first after 15 s idle, then every 15 s,
// 9 unanswered ones drop it).
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 15 * time.Second
	keepAliveCount    = 9
)

// Listen opens the public TCP listener on addr. Its connections get TCP
// keep-alive probes as Go's default listener gives them; where the
// kernel copies a listener's socket options to the connections it
// accepts (Linux), they are set once on the listener rather than with
// four system calls on every accepted connection.
func Listen(addr string) (net.Listener, error) {
	return listenConfig().Listen(context.Background(), "tcp", addr)
}
