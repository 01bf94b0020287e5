package gateway

import (
	"sync"
	"sync/atomic"
)

// homeTable is the gateway's route table of homes, by target and by id.
// The request path reads it under a read lock (one map hit), and a change
// is one insert or delete under homeMu: registering the n-th home costs
// the same as the first, where a copy of the table per change made
// registering n homes cost n² (gateway/hometable_test.go counts it).
// Plain maps, rather than sync.Maps whose every entry is an object of its
// own, keep 100,000 homes in a few large arrays that the garbage
// collector marks quickly.
type homeTable struct {
	// mu guards the maps; nothing is called while it is held.
	mu       sync.RWMutex
	byTarget map[string]*homeRoute
	byID     map[string]*homeRoute
	n        atomic.Int64
}

// homeAt returns the home routed at /node/{target}.
func (g *Gateway) homeAt(target string) (*homeRoute, bool) {
	t := &g.homeTab
	t.mu.RLock()
	h, ok := t.byTarget[target]
	t.mu.RUnlock()
	return h, ok
}

// homeWithID returns the home with id.
func (g *Gateway) homeWithID(id string) (*homeRoute, bool) {
	t := &g.homeTab
	t.mu.RLock()
	h, ok := t.byID[id]
	t.mu.RUnlock()
	return h, ok
}

// homeCount is how many homes are routed.
func (g *Gateway) homeCount() int { return int(g.homeTab.n.Load()) }

// eachHome calls fn for every routed home, in no order, until it returns
// false (admin lists and shutdown; never the request path). fn sees the
// homes routed when eachHome was called, and may change the table.
func (g *Gateway) eachHome(fn func(h *homeRoute) bool) {
	t := &g.homeTab
	t.mu.RLock()
	all := make([]*homeRoute, 0, len(t.byID))
	for _, h := range t.byID {
		all = append(all, h)
	}
	t.mu.RUnlock()
	for _, h := range all {
		if !fn(h) {
			return
		}
	}
}

// current returns the route of h's home as it is now (a home replaced
// through the admin API has a new route; apps keep the one they were built
// with).
func (g *Gateway) current(h *homeRoute) *homeRoute {
	if cur, ok := g.homeWithID(h.spec.ID); ok {
		return cur
	}
	return h
}

// setHome puts h in place of the home with its id (nil h removes the home
// with id). A request that runs meanwhile finds the old route or the new
// one.
func (g *Gateway) setHome(id string, h *homeRoute) {
	g.homeMu.Lock()
	defer g.homeMu.Unlock()
	g.homeTab.set(id, h)
	g.hostsChanged()
}

// set is setHome's change of the maps.
func (t *homeTable) set(id string, h *homeRoute) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byTarget, t.byID = map[string]*homeRoute{}, map[string]*homeRoute{}
	}
	if prev, ok := t.byID[id]; ok {
		if pt := prev.spec.Target; (h == nil || pt != h.spec.Target) && t.byTarget[pt] == prev {
			delete(t.byTarget, pt)
		}
		if h == nil {
			delete(t.byID, id)
			t.n.Add(-1)
		}
	} else if h != nil {
		t.n.Add(1)
	}
	if h != nil {
		t.byTarget[h.spec.Target] = h
		t.byID[id] = h
	}
}
