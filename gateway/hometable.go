package gateway

import "maps"

// homeTable is the gateway's route table of homes, by target and by id. It
// is never changed once published: the request path loads it with one
// atomic read, and the admin API publishes a changed copy (copy on write)
// under homeMu.
type homeTable struct {
	byTarget map[string]*homeRoute
	byID     map[string]*homeRoute
}

// homeAt returns the home routed at /node/{target}.
func (g *Gateway) homeAt(target string) (*homeRoute, bool) {
	h, ok := g.homeTab.Load().byTarget[target]
	return h, ok
}

// homeWithID returns the home with id.
func (g *Gateway) homeWithID(id string) (*homeRoute, bool) {
	h, ok := g.homeTab.Load().byID[id]
	return h, ok
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

// setHome publishes a table with h in place of the home with its id (nil
// h removes the home with id).
func (g *Gateway) setHome(id string, h *homeRoute) {
	g.homeMu.Lock()
	defer g.homeMu.Unlock()
	old := g.homeTab.Load()
	t := &homeTable{byTarget: maps.Clone(old.byTarget), byID: maps.Clone(old.byID)}
	if prev, ok := t.byID[id]; ok {
		delete(t.byTarget, prev.spec.Target)
		delete(t.byID, id)
	}
	if h != nil {
		t.byTarget[h.spec.Target] = h
		t.byID[id] = h
	}
	g.homeTab.Store(t)
	g.hostsChanged()
}
