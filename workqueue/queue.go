package workqueue

import (
	"context"
	"sync"
)

// Queue runs work for the keys added to it, at most a fixed number at
// once. Its methods are safe for concurrent use.
type Queue struct {
	ctx     context.Context
	cancel  context.CancelFunc
	work    func(ctx context.Context, key string)
	workers int
	wg      sync.WaitGroup

	mu      sync.Mutex
	ready   []string            // keys waiting, none of them running, oldest first
	queued  map[string]struct{} // keys waiting: in ready, or for their own run to end
	running map[string]struct{} // keys being worked on
	active  int                 // workers running
	closed  bool
}

// New returns a queue that calls work for each added key, with at most
// workers (at least 1) calls at once. Every call gets a context that ends
// with ctx or at Close; no call starts once ctx is done. Close the queue
// to wait for its workers.
func New(ctx context.Context, workers int, work func(ctx context.Context, key string)) *Queue {
	q := &Queue{work: work, workers: max(workers, 1),
		queued: map[string]struct{}{}, running: map[string]struct{}{}}
	q.ctx, q.cancel = context.WithCancel(ctx)
	return q
}

// Add queues key unless it waits already. A key whose work runs now is
// worked on once more after that run. Add does nothing once the queue's
// context is done or the queue is closed.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.ctx.Err() != nil {
		return
	}
	if _, ok := q.queued[key]; ok {
		return
	}
	q.queued[key] = struct{}{}
	if _, ok := q.running[key]; ok {
		return // done puts it back once its run ends
	}
	q.ready = append(q.ready, key)
	if q.active < q.workers {
		q.active++
		q.wg.Add(1)
		go q.worker()
	}
}

// Len returns how many keys wait (the ones running are not counted).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// Close cancels the work that runs, drops the keys that wait and waits
// for every worker to return. Close may be called more than once.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cancel()
	q.wg.Wait()
}

// worker works on ready keys until none is left or the queue ends.
func (q *Queue) worker() {
	defer q.wg.Done()
	for {
		key, ok := q.next()
		if !ok {
			return
		}
		q.work(q.ctx, key)
		q.done(key)
	}
}

// next takes the oldest ready key, or ends the worker when none is left
// or the queue ended.
func (q *Queue) next() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx.Err() != nil {
		clear(q.queued)
		q.ready = nil
	}
	if len(q.ready) == 0 {
		q.active--
		return "", false
	}
	key := q.ready[0]
	q.ready[0] = ""
	q.ready = q.ready[1:]
	delete(q.queued, key)
	q.running[key] = struct{}{}
	return key, true
}

// done ends key's run. A key added again during the run is ready now; the
// worker that ran it is still active, so it needs no worker of its own.
func (q *Queue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.running, key)
	if _, ok := q.queued[key]; ok {
		q.ready = append(q.ready, key)
	}
}
