// Package idletick keeps the period of the lifecycle engine's idle loop:
// the configured one (config, a reload), shortened for a registered home
// whose idle timeout needs more frequent checks, with a broadcast to the
// loop when it changes so that its next check comes one new period later.
//
// DESIGN rules that live here: none of its own; it serves the idle
// suspends of the engine (package wake), whose checks must come often
// enough for the shortest idle timeout of a home.
package idletick

import (
	"sync"
	"time"
)

// Clock is the period of the idle loop's checks. Its zero value is ready:
// the period is 0 until Set. Its methods are safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	tick    time.Duration // the configured period
	need    time.Duration // the shortest period a registered home needs; 0: none
	changed chan struct{} // closed and replaced when the period changes
}

// Get returns the period and a channel closed when it next changes.
func (c *Clock) Get() (time.Duration, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.effective(), c.changed
}

// Set changes the configured period, waking the loop when its period
// changes.
func (c *Clock) Set(tick time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(func() { c.tick = tick })
}

// Shorten records that a registered home needs a period of at most need,
// waking the loop when its period changes. A period once shortened stays
// so until the gateway restarts: a check costs the awake homes only.
func (c *Clock) Shorten(need time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if need > 0 && (c.need <= 0 || need < c.need) {
		c.update(func() { c.need = need })
	}
}

// Need is the period a home with idle timeout d needs: a quarter of it, at
// least 10ms; 0 for a home never suspended.
func Need(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return max(d/4, 10*time.Millisecond)
}

// effective is the period the loop uses: the configured one, shortened
// for a registered home whose idle timeout needs it. c.mu is held.
func (c *Clock) effective() time.Duration {
	if c.need > 0 && (c.tick <= 0 || c.need < c.tick) {
		return c.need
	}
	return c.tick
}

// update applies change and, when the period moved, wakes the loop. c.mu
// is held.
func (c *Clock) update(change func()) {
	before := c.effective()
	change()
	if c.effective() == before {
		return
	}
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}
