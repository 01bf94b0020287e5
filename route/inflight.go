package route

import (
	"sync"
	"sync/atomic"
)

// Inflight counts the requests being served, for the drain to wait on.
// It replaces a sync.WaitGroup, whose contract (an Add from zero must
// happen before Wait) a server cannot keep: a connection accepted just as
// the listener closes, or a self-probe of an app's observation loop sent
// just before the drain began, starts a request while the drain waits.
// Here Add may run at any time; Wait returns once the count is zero. The
// request path pays one atomic add per Add and Done.
type Inflight struct {
	n    atomic.Int64
	mu   sync.Mutex
	wait chan struct{} // closed when the count reaches zero; nil when nobody waits
}

// Add adds d to the count.
func (c *Inflight) Add(d int) {
	if c.n.Add(int64(d)) != 0 {
		return
	}
	c.mu.Lock()
	if c.wait != nil && c.n.Load() == 0 {
		close(c.wait)
		c.wait = nil
	}
	c.mu.Unlock()
}

// Count returns the count now.
func (c *Inflight) Count() int { return int(c.n.Load()) }

// Done subtracts one from the count.
func (c *Inflight) Done() { c.Add(-1) }

// Wait returns once the count is zero.
func (c *Inflight) Wait() { <-c.Zero() }

// Zero returns a channel that is closed once the count is zero (already
// closed when it is zero now). Selecting on it starts no goroutine, so a
// drain that gives up waiting leaves nothing behind.
func (c *Inflight) Zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n.Load() == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if c.wait == nil {
		c.wait = make(chan struct{})
	}
	return c.wait
}
