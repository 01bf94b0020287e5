package refresh

import (
	"context"
	"log/slog"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/workqueue"
)

// Refreshes at start run in the background, at most Parallel at a time,
// on a keyed work queue whose workers Close waits for: a start with many
// running homes neither waits for their providers nor blocks /readyz, and
// never looks at the homes that sleep. A home queued twice is refreshed
// once, and never by two workers at once.

// Parallel bounds the refreshes at start that run at once.
const Parallel = 8

// Queue queues the refreshes of adopted homes (cause "adopt") and runs
// them.
type Queue struct {
	q         *workqueue.Queue
	refresher *Refresher
	log       *slog.Logger
}

// NewQueue returns a queue of refreshes by r. ctx ends the queue: no
// refresh starts once it is done, and the ones running are cancelled.
// Close it to wait for its workers.
func NewQueue(ctx context.Context, r *Refresher, log *slog.Logger) *Queue {
	q := &Queue{refresher: r, log: log}
	q.q = workqueue.New(ctx, Parallel, q.refresh)
	return q
}

// Add queues home id's refresh.
func (q *Queue) Add(id string) { q.q.Add(id) }

// Close cancels the refreshes that run, drops the queued ones and waits
// for the queue's workers.
func (q *Queue) Close() { q.q.Close() }

// refresh refreshes home id, bounded by Timeout.
func (q *Queue) refresh(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(ctx, Timeout)
	_, err := q.refresher.Refresh(rctx, id, "adopt")
	cancel()
	switch {
	case err == nil, ctx.Err() != nil:
	case fault.Is(err, fault.Busy), fault.Is(err, fault.NotFound):
		// Another operation settles the home (a request woke it
		// meanwhile), or it was removed.
		q.log.Debug("refresh at start skipped", "home", id, "err", err)
	default:
		q.log.Warn("refresh at start", "home", id, "err", err)
	}
}
