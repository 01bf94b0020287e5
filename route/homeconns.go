package route

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/fault"
)

// CodeHomeAtCapacity is the public code of a request that waited for one
// of its home's forwarding slots (proxy.max_conns_per_home) and did not
// get one in time.
const CodeHomeAtCapacity = "home_at_capacity"

// HomeConns caps the plain requests forwarded to each home at once
// (proxy.max_conns_per_home). Every request forwarded to a home holds one
// of its slots from the moment its body has been read ahead (the proxy
// calls Acquire through forward.Route.Acquire, proxy/spool.go) until the answer
// has been relayed, so a slow upload holds only its own connection;
// requests past the cap wait in order of arrival for a slot, bounded by
// their own context and by maxWait. With the upstream keep-alive pool at
// least as large as the cap, a burst on one home (the callers released
// together by a wake) reuses at most max warm connections instead of
// dialling one per caller and making the home accept them all, and the
// home never holds more than max of this gateway's requests at once.
//
// WebSockets and other upgrades take no slot: they last as long as their
// user stays, and a cap on them would be a cap on users, not on a burst.
type HomeConns struct {
	max     int           // slots per home; 0: no cap
	maxWait time.Duration // the longest wait for a slot
	retry   time.Duration // Retry-After of a request that got none

	slots sync.Map // home id -> chan struct{} with max places

	// waits counts the requests that found every slot of their home
	// taken and waited; refused those that got none (503, or their
	// caller went away first).
	waits, refused prometheus.Counter
}

// NewHomeConns returns the cap of max requests per home (0: none).
func NewHomeConns(max int, maxWait, retry time.Duration) *HomeConns {
	return &HomeConns{max: max, maxWait: maxWait, retry: retry,
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_home_conn_waits_total",
			Help: "Requests that found every forwarding slot of their home taken (proxy.max_conns_per_home) and waited for one.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_home_conn_refused_total",
			Help: "Requests that waited for a forwarding slot of their home and got none: 503 home_at_capacity, or their caller went away first.",
		}),
	}
}

// Collectors are the cap's metrics, for the gateway's registry.
func (c *HomeConns) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.waits, c.refused}
}

// Acquire takes one of home id's slots for request r, waiting in order of
// arrival while all are taken. It returns the slot to give back to
// Release (nil when the request takes none), or a not-ready error when r's
// context ended or maxWait passed first.
func (c *HomeConns) Acquire(r *http.Request, id string) (chan struct{}, error) {
	if c.max <= 0 || r.Header.Get("Upgrade") != "" {
		return nil, nil
	}
	s, ok := c.slots.Load(id)
	if !ok {
		s, _ = c.slots.LoadOrStore(id, make(chan struct{}, c.max))
	}
	slot := s.(chan struct{})
	select {
	case slot <- struct{}{}:
		return slot, nil
	default:
	}
	if err := c.wait(r.Context(), slot); err != nil {
		return nil, err
	}
	return slot, nil
}

// wait is Acquire's slow path: every slot is taken.
func (c *HomeConns) wait(ctx context.Context, slot chan struct{}) error {
	c.waits.Inc()
	t := time.NewTimer(c.maxWait)
	defer t.Stop()
	select {
	case slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return c.refuse(context.Cause(ctx))
	case <-t.C:
		return c.refuse(fmt.Errorf("no slot freed in %s: %w", c.maxWait, context.DeadlineExceeded))
	}
}

// refuse is the answer for a request that got no slot; cause says why.
func (c *HomeConns) refuse(cause error) error {
	c.refused.Inc()
	return fault.Wrap(fault.NotReady, CodeHomeAtCapacity,
		"The home is answering as many requests as it takes at once; try again shortly.",
		fmt.Errorf("waiting for one of the home's %d forwarding slots: %w", c.max, cause)).
		WithRetry(c.retry).
		WithHint("every slot of proxy.max_conns_per_home was held by a request to this home for the whole wait: " +
			"the home answers slowly, or the cap is too low for its load")
}

// Release gives back a slot that Acquire returned.
func (c *HomeConns) Release(slot chan struct{}) {
	if slot != nil {
		<-slot
	}
}

// Forget drops home id's slots (the home was removed); requests holding
// one give it back to the dropped set.
func (c *HomeConns) Forget(id string) { c.slots.Delete(id) }
