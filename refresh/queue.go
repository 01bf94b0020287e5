package refresh

import (
	"context"
	"log/slog"
	"sync"

	"github.com/wakegate/wakegate/fault"
)

// Refreshes at start run in the background, at most Parallel at a time,
// on goroutines their owner waits for (WG): a start with many running
// homes neither waits for their providers nor blocks /readyz, and never
// looks at the homes that sleep.

// Parallel bounds the refreshes at start that run at once.
const Parallel = 8

// Queue queues the refreshes of adopted homes (cause "adopt") and runs
// them. Its fields are set before the first Add; none changes after.
type Queue struct {
	// Ctx ends the queue: no refresh starts once it is done, and the one
	// running is cancelled.
	Ctx context.Context
	// WG counts the queue's goroutines, for its owner to wait for.
	WG        *sync.WaitGroup
	Refresher *Refresher
	Log       *slog.Logger

	mu      sync.Mutex
	queue   []string
	workers int
}

// Add queues home id's refresh and starts a worker if fewer than Parallel
// run.
func (q *Queue) Add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.Ctx.Err() != nil {
		return
	}
	q.queue = append(q.queue, id)
	if q.workers >= Parallel {
		return
	}
	q.workers++
	q.WG.Add(1)
	go func() {
		defer q.WG.Done()
		q.work()
	}()
}

// next takes the next queued home, or ends the worker when none is left.
func (q *Queue) next() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 || q.Ctx.Err() != nil {
		q.workers--
		q.queue = nil
		return "", false
	}
	id := q.queue[0]
	q.queue[0] = ""
	q.queue = q.queue[1:]
	return id, true
}

// work refreshes queued homes until the queue is empty or Ctx ends.
func (q *Queue) work() {
	for {
		id, ok := q.next()
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(q.Ctx, Timeout)
		_, err := q.Refresher.Refresh(ctx, id, "adopt")
		cancel()
		switch {
		case err == nil, q.Ctx.Err() != nil:
		case fault.Is(err, fault.Busy), fault.Is(err, fault.NotFound):
			// Another operation settles the home (a request woke it
			// meanwhile), or it was removed.
			q.Log.Debug("refresh at start skipped", "home", id, "err", err)
		default:
			q.Log.Warn("refresh at start", "home", id, "err", err)
		}
	}
}
