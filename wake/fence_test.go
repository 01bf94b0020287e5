package wake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// fenceWatch passes every call on to the real store and records the
// lifecycle writes of home records: the status each wrote and the fence
// it carried.
type fenceWatch struct {
	registry.Store
	mu     sync.Mutex
	writes []fencedWrite
	leases []registry.Lease
}

type fencedWrite struct {
	status registry.Status
	fence  registry.Fence
}

func (w *fenceWatch) PutHome(ctx context.Context, h registry.Home, cond registry.Cond) (registry.Home, error) {
	w.mu.Lock()
	w.writes = append(w.writes, fencedWrite{status: h.Status, fence: cond.Fence})
	w.mu.Unlock()
	return w.Store.PutHome(ctx, h, cond)
}

func (w *fenceWatch) Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error) {
	l, err := w.Store.Lock(ctx, name, holder, ttl)
	if err == nil {
		w.mu.Lock()
		w.leases = append(w.leases, l)
		w.mu.Unlock()
	}
	return l, err
}

// Every write a wake and a suspend make to the home's record while they
// hold its lifecycle lock carries that lock's fence (its name and the
// token it was taken with), so that the store refuses it once the lease is
// lost (DESIGN: fleet). A write without one would pass the conformance
// suite's fence checks and still let a stale holder write.
func TestLifecycleWritesCarryTheFence(t *testing.T) {
	w := &fenceWatch{}
	r := newRig(t, rigOptions{wrapStore: func(s registry.Store) registry.Store { w.Store = s; return w }})
	w.mu.Lock()
	w.writes, w.leases = nil, nil // the registration's writes are not under a lock
	w.mu.Unlock()
	r.ensure()
	if err := r.eng.Suspend(context.Background(), rigHome); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	tokens := map[uint64]bool{}
	for _, l := range w.leases {
		if l.Name == "home/"+rigHome {
			tokens[l.Token] = true
		}
	}
	seen := map[registry.Status]bool{}
	for _, wr := range w.writes {
		seen[wr.status] = true
		if wr.fence.Lock != "home/"+rigHome || !tokens[wr.fence.Token] {
			t.Errorf("a write of status %s carried fence %+v, want the home's lock with a token it was taken with (%v)",
				wr.status, wr.fence, tokens)
		}
	}
	for _, st := range []registry.Status{registry.StatusWaking, registry.StatusRunning, registry.StatusSuspended} {
		if !seen[st] {
			t.Errorf("no write of status %s was seen (writes %+v)", st, w.writes)
		}
	}
}
