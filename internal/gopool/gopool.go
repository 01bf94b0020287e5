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
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs run(v) for each v given to Go, on a goroutine that waits for
// one or on a new one. At most maxIdle goroutines wait at once, each for
// at most idleFor; Halt ends every wait.
type Pool[T any] struct {
	run     func(T)
	maxIdle int32
	idleFor time.Duration

	next     chan T
	idle     atomic.Int32
	started  atomic.Int64
	halt     chan struct{}
	haltOnce sync.Once
	wg       sync.WaitGroup
}

// New returns a pool that runs run, keeping at most maxIdle goroutines
// waiting, each for at most idleFor.
func New[T any](run func(T), maxIdle int, idleFor time.Duration) *Pool[T] {
	return &Pool[T]{run: run, maxIdle: int32(maxIdle), idleFor: idleFor,
		next: make(chan T), halt: make(chan struct{})}
}

// Go runs run(v) on a waiting goroutine, or on a new one when none waits.
// It never blocks.
func (p *Pool[T]) Go(v T) {
	select {
	case p.next <- v:
	default:
		p.started.Add(1)
		p.wg.Add(1)
		go p.work(v)
	}
}

// work runs v, then each value handed to it while it waits.
func (p *Pool[T]) work(v T) {
	defer p.wg.Done()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for ok := true; ok; v, ok = p.await(&t) {
		p.run(v)
	}
}

// await waits for the next value with the timer *t (made at the first
// wait): false when none came in time, the pool is halted, or enough
// goroutines wait already.
func (p *Pool[T]) await(t **time.Timer) (T, bool) {
	var zero T
	if p.idle.Add(1) > p.maxIdle || p.halted() {
		p.idle.Add(-1)
		return zero, false
	}
	defer p.idle.Add(-1)
	if *t == nil {
		*t = time.NewTimer(p.idleFor)
	} else {
		(*t).Reset(p.idleFor)
	}
	select {
	case v := <-p.next:
		return v, true
	case <-(*t).C:
	case <-p.halt:
	}
	return zero, false
}

func (p *Pool[T]) halted() bool {
	select {
	case <-p.halt:
		return true
	default:
		return false
	}
}

// Halt ends the wait of every waiting goroutine, at once and from now on:
// a goroutine ends when its work does. Go still runs what it is given.
func (p *Pool[T]) Halt() { p.haltOnce.Do(func() { close(p.halt) }) }

// Wait waits until every goroutine of the pool has ended: after Halt, the
// end of the work they run. Go must not be called while Wait runs.
func (p *Pool[T]) Wait() { p.wg.Wait() }

// Started is how many goroutines Go has started: fewer than the values it
// was given when waiting goroutines took some.
func (p *Pool[T]) Started() int64 { return p.started.Load() }

// Idle is how many goroutines wait now.
func (p *Pool[T]) Idle() int { return int(p.idle.Load()) }
