package gateway

import (
	"sync"
	"sync/atomic"
)

// homeTable is the gateway's route table of homes, by target and by id.
// The request path reads it with no lock (sync.Map reads of stable keys
// take none and write nothing shared), and a change is one insert or
// delete under homeMu: registering the n-th home costs the same as the
// first, where a copy of the table per change made registering n homes
// cost n² (gateway/hometable_test.go counts it).
type homeTable struct {
	byTarget sync.Map // target -> *homeRoute
	byID     sync.Map // id -> *homeRoute
	n        atomic.Int64
}

// homeAt returns the home routed at /node/{target}.
func (g *Gateway) homeAt(target string) (*homeRoute, bool) {
	v, ok := g.homeTab.byTarget.Load(target)
	if !ok {
		return nil, false
	}
	return v.(*homeRoute), true
}

// homeWithID returns the home with id.
func (g *Gateway) homeWithID(id string) (*homeRoute, bool) {
	v, ok := g.homeTab.byID.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*homeRoute), true
}

// homeCount is how many homes are routed.
func (g *Gateway) homeCount() int { return int(g.homeTab.n.Load()) }

// eachHome calls fn for every routed home, in no order, until it returns
// false (admin lists and shutdown; never the request path).
func (g *Gateway) eachHome(fn func(h *homeRoute) bool) {
	g.homeTab.byID.Range(func(_, v any) bool { return fn(v.(*homeRoute)) })
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
	t := &g.homeTab
	if prev, ok := t.byID.Load(id); ok {
		if pt := prev.(*homeRoute).spec.Target; h == nil || pt != h.spec.Target {
			t.byTarget.CompareAndDelete(pt, prev)
		}
		if h == nil {
			t.byID.Delete(id)
			t.n.Add(-1)
		}
	} else if h != nil {
		t.n.Add(1)
	}
	if h != nil {
		t.byTarget.Store(h.spec.Target, h)
		t.byID.Store(id, h)
	}
	g.hostsChanged()
}
