package fly

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The Machines API's documented rate limits: per action, per machine, 1
// request per second with bursts of 3; Get Machine 5 per second with
// bursts of 10.
const (
	actionRate  rate.Limit = 1
	actionBurst            = 3
	getRate     rate.Limit = 5
	getBurst               = 10
)

// idleLimiter is how long a limiter may go unused before it is dropped: by
// then its bucket is full again, so a new one behaves the same.
const idleLimiter = 30 * time.Second

// limiters keeps one token bucket per machine and action, so that no
// sequence of calls this process makes can exceed the API's limits. Idle
// buckets are dropped as new ones are made, keeping the map as small as
// the set of machines touched in the last half minute.
type limiters struct {
	mu     sync.Mutex
	m      map[limitKey]*bucket
	pruned time.Time
}

type limitKey struct{ machine, action string }

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// wait blocks until the call may be made, or returns at once when ctx
// would end first (rate.Limiter.Wait's own check of the deadline).
func (l *limiters) wait(ctx context.Context, machine, action string) error {
	return l.get(machine, action).Wait(ctx)
}

func (l *limiters) get(machine, action string) *rate.Limiter {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[limitKey]*bucket)
	}
	k := limitKey{machine, action}
	b, ok := l.m[k]
	if !ok {
		if now.Sub(l.pruned) > idleLimiter {
			for k, b := range l.m {
				if now.Sub(b.used) > idleLimiter {
					delete(l.m, k)
				}
			}
			l.pruned = now
		}
		r, burst := actionRate, actionBurst
		if action == actGet {
			r, burst = getRate, getBurst
		}
		b = &bucket{lim: rate.NewLimiter(r, burst)}
		l.m[k] = b
	}
	b.used = now
	return b.lim
}
