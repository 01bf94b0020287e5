package h1serve

import (
	"time"

	"github.com/wakegate/wakegate/internal/gopool"
)

// Each connection is served on a goroutine of its own, as net/http serves
// it, but a goroutine that has served one waits a while for the next
// connection the listener accepts, with the stack it grew (internal/gopool):
// a connection that carries a single request no longer pays a goroutine's
// start and the copies of its stack. Shutdown and Close end the waits.

// maxIdleWorkers bounds the goroutines waiting for a connection.
const maxIdleWorkers = 256

// idleWorker is how long a goroutine waits for the next connection.
const idleWorker = 2 * time.Second

// newWorkers returns the pool that serves the connections, its goroutines
// waiting idle (idleWorker when zero).
func newWorkers(idle time.Duration) *gopool.Pool[*conn] {
	if idle <= 0 {
		idle = idleWorker
	}
	return gopool.New((*conn).serve, maxIdleWorkers, idle)
}
