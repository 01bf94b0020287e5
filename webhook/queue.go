package webhook

import (
	"sync"

	"github.com/wakegate/wakegate/events"
)

// queue is a bounded FIFO of events for one webhook's worker: push never
// blocks, and a full queue gives up its oldest event for the new one.
type queue struct {
	mu     sync.Mutex
	ring   []events.Event
	head   int  // index of the oldest event
	n      int  // events held
	behind bool // dropped since the queue was last empty
	// ready holds a token while events may wait: push leaves one, the
	// worker takes it before it drains the queue.
	ready chan struct{}
}

func newQueue(size int) *queue {
	return &queue{ring: make([]events.Event, size), ready: make(chan struct{}, 1)}
}

// size is the queue's bound, in events.
func (q *queue) size() int { return len(q.ring) }

// push adds ev. dropped says the oldest event was pushed out to make room;
// first says that is the first drop since the queue was last empty.
func (q *queue) push(ev events.Event) (dropped, first bool) {
	q.mu.Lock()
	if q.n == len(q.ring) {
		q.ring[q.head] = events.Event{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		dropped, first = true, !q.behind
		q.behind = true
	}
	q.ring[(q.head+q.n)%len(q.ring)] = ev
	q.n++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return dropped, first
}

// pop takes the oldest event; ok is false when the queue is empty.
func (q *queue) pop() (ev events.Event, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		q.behind = false
		return events.Event{}, false
	}
	ev = q.ring[q.head]
	q.ring[q.head] = events.Event{}
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return ev, true
}
