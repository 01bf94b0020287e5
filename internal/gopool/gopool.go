// Package gopool runs work on goroutines that, once done, wait a while for
// the next piece instead of ending.
//
// A goroutine's stack starts small and is copied to a larger one each
// time its calls need more. Work that goes deep (serving a proxied
// request, a TLS handshake) takes a new goroutine through several copies
// before it does anything useful, and a server that starts one per
// connection pays them for every connection that carries little: a client
// without keep-alive, a burst of callers dialling at once. A goroutine
// that waits for the next piece keeps the stack it grew. How many wait,
// and for how long, is bounded: each holds its stack while it waits, until
// a collection finds the stack mostly unused and halves it.
package gopool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs run(v) for each v given to Go, on a goroutine that waits for
// one or on a new one. At most maxIdle goroutines wait at once, each for
// at most idleFor; Halt ends every wait.
type Pool[T any] struct {
	run     func(T)
	maxIdle int
	idleFor time.Duration

	mu     sync.Mutex
	ready  []*waiter[T] // the goroutines waiting, the latest last
	halted bool

	halt     chan struct{}
	haltOnce sync.Once
	started  atomic.Int64
	wg       sync.WaitGroup
}

// waiter is one goroutine's place in the pool: Go takes it out of ready
// and sends on ch, which holds one value, so the send never blocks and the
// goroutine takes the value even if its wait is ending meanwhile.
type waiter[T any] struct{ ch chan T }

// New returns a pool that runs run, keeping at most maxIdle goroutines
// waiting, each for at most idleFor.
func New[T any](run func(T), maxIdle int, idleFor time.Duration) *Pool[T] {
	return &Pool[T]{run: run, maxIdle: maxIdle, idleFor: idleFor, halt: make(chan struct{})}
}

// Go runs run(v) on the goroutine that began waiting last, or on a new
// one when none waits. It never blocks.
func (p *Pool[T]) Go(v T) {
	p.mu.Lock()
	if n := len(p.ready); n > 0 {
		w := p.ready[n-1]
		p.ready[n-1] = nil
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		w.ch <- v
		return
	}
	p.mu.Unlock()
	p.started.Add(1)
	p.wg.Add(1)
	go p.work(v)
}

// work runs v, then each value handed to it while it waits.
func (p *Pool[T]) work(v T) {
	defer p.wg.Done()
	w := &waiter[T]{ch: make(chan T, 1)}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for ok := true; ok; v, ok = p.await(w, &t) {
		p.run(v)
	}
}

// await waits for the next value with the timer *t (made at the first
// wait): false when none came in time, the pool is halted, or enough
// goroutines wait already.
func (p *Pool[T]) await(w *waiter[T], t **time.Timer) (T, bool) {
	var zero T
	p.mu.Lock()
	if p.halted || len(p.ready) >= p.maxIdle {
		p.mu.Unlock()
		return zero, false
	}
	p.ready = append(p.ready, w)
	p.mu.Unlock()
	if *t == nil {
		*t = time.NewTimer(p.idleFor)
	} else {
		(*t).Reset(p.idleFor)
	}
	select {
	case v := <-w.ch:
		return v, true
	case <-(*t).C:
	case <-p.halt:
	}
	p.mu.Lock()
	if i := slices.Index(p.ready, w); i >= 0 {
		p.ready = slices.Delete(p.ready, i, i+1)
		p.mu.Unlock()
		return zero, false
	}
	p.mu.Unlock()
	// Go took this goroutine as the wait ended: its value is sent, or
	// about to be, and must run.
	return <-w.ch, true
}

// Halt ends the wait of every waiting goroutine, at once and from now on:
// a goroutine ends when its work does. Go still runs what it is given.
func (p *Pool[T]) Halt() {
	p.haltOnce.Do(func() {
		p.mu.Lock()
		p.halted = true
		p.mu.Unlock()
		close(p.halt)
	})
}

// Wait waits until every goroutine of the pool has ended: after Halt, the
// end of the work they run. Go must not be called while Wait runs.
func (p *Pool[T]) Wait() { p.wg.Wait() }

// Started is how many goroutines Go has started: fewer than the values it
// was given when waiting goroutines took some.
func (p *Pool[T]) Started() int64 { return p.started.Load() }

// Idle is how many goroutines wait now: as many values given to Go from
// now on run without a new goroutine.
func (p *Pool[T]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}
