package bolt

import (
	"context"
	"sync"
	"sync/atomic"

	"go.etcd.io/bbolt"
)

// maxGroup caps the writes one transaction carries; the rest wait for the
// next.
const maxGroup = 256

// committer runs the store's writes, joining those that arrive together
// into one bbolt transaction: one commit, so one pair of fdatasyncs, for
// all of them. A write that finds no commit under way commits at once, on
// its caller's goroutine, as bbolt's own Update would; writes that arrive
// while a commit runs queue, and the first of them, once that commit is
// over, commits every one queued by then. So a lone write waits for
// nothing, and a burst of writes (a storm of wakes, each recording its
// home) costs a commit per group rather than per write: on a disk whose
// sync takes milliseconds, the difference between hundreds of writes a
// second and thousands.
//
// Each write still has the effect and the error it would have alone: the
// writes of a group run one after the other in one transaction, in the
// order they queued; when one fails, the transaction is rolled back, the
// others are committed without it, and it runs again alone (as bbolt's
// Batch does), so a failed write never undoes another's. A write must
// therefore have no effect outside its transaction but the values it
// returns, which it sets anew on each run.
type committer struct {
	db *bbolt.DB

	mu    sync.Mutex
	queue []*write
	busy  bool // a commit runs, or a caller is about to start one
}

// write is one caller's write: its function, its context, and where its
// outcome goes.
type write struct {
	ctx context.Context
	fn  func(*bbolt.Tx) error
	err error
	// state is queued until a commit takes the write (taken), or its
	// caller gives up on it first (abandoned): whichever comes first wins,
	// so a write its caller gave up on never runs.
	state atomic.Int32
	// turn receives false when the write is done (err is set), or true
	// when its caller is to commit the queue.
	turn chan bool
}

// The states of a write.
const (
	queued int32 = iota
	taken
	abandoned
)

// do runs fn in a write transaction, alone or with the writes queued beside
// it, and returns its error or the commit's. A write still queued when ctx
// ends is dropped and returns ctx's error; once a commit took it, its
// caller waits for the commit whatever ctx says. So an error always means
// the write did not happen.
func (c *committer) do(ctx context.Context, fn func(*bbolt.Tx) error) error {
	w := &write{ctx: ctx, fn: fn, turn: make(chan bool, 1)}
	c.mu.Lock()
	if c.busy {
		c.queue = append(c.queue, w)
		c.mu.Unlock()
		var lead bool
		select {
		case lead = <-w.turn:
		case <-ctx.Done():
			if w.state.CompareAndSwap(queued, abandoned) {
				return ctx.Err()
			}
			lead = <-w.turn
		}
		if !lead {
			return w.err
		}
		c.mu.Lock()
	} else {
		c.busy = true
		w.state.Store(taken)
	}
	group := []*write{w}
	for len(c.queue) > 0 && len(group) < maxGroup {
		o := c.queue[0]
		c.queue = c.queue[1:]
		if o.state.CompareAndSwap(queued, taken) {
			group = append(group, o)
		}
	}
	c.mu.Unlock()

	c.commit(group)
	for _, o := range group[1:] {
		o.turn <- false
	}
	c.mu.Lock()
	c.handOver()
	c.mu.Unlock()
	return w.err
}

// handOver makes the first write still queued the next to commit, or
// marks the committer idle when there is none. c.mu is held.
func (c *committer) handOver() {
	for len(c.queue) > 0 {
		o := c.queue[0]
		c.queue = c.queue[1:]
		if o.state.CompareAndSwap(queued, taken) {
			o.turn <- true
			return
		}
	}
	c.queue = nil
	c.busy = false
}

// commit runs group in as few transactions as its failures allow, and sets
// every write's err.
func (c *committer) commit(group []*write) {
	live := group[:0:0]
	for _, w := range group {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			continue
		}
		live = append(live, w)
	}
	var alone []*write
	for len(live) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for i, w := range live {
				if err := w.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, w := range live {
				w.err = err
			}
			break
		}
		if len(live) == 1 {
			live[0].err = err
			break
		}
		// The rest go again without it; it runs alone after, on the state
		// they leave.
		alone = append(alone, live[failed])
		live = append(live[:failed:failed], live[failed+1:]...)
	}
	for _, w := range alone {
		w.err = c.db.Update(w.fn)
	}
}
