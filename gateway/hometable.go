package gateway

import "github.com/wakegate/wakegate/route"

// The gateway's home table is control.HomeTable (g.homeTab); these are
// its reads by the request path and the admin API, and its one writer.

// homeAt returns the home routed at /node/{target}.
func (g *Gateway) homeAt(target string) (*route.Home, bool) { return g.homeTab.At(target) }

// homeWithID returns the home with id.
func (g *Gateway) homeWithID(id string) (*route.Home, bool) { return g.homeTab.WithID(id) }

// homeCount is how many homes are routed.
func (g *Gateway) homeCount() int { return g.homeTab.Count() }

// eachHome calls fn for every routed home, in no order, until it returns
// false (admin lists and shutdown; never the request path). fn sees the
// homes routed when eachHome was called, and may change the table.
func (g *Gateway) eachHome(fn func(h *route.Home) bool) { g.homeTab.Each(fn) }

// setHome puts h in place of the home with its id (nil h removes the home
// with id). A request that runs meanwhile finds the old route or the new
// one.
func (g *Gateway) setHome(id string, h *route.Home) {
	g.homeMu.Lock()
	defer g.homeMu.Unlock()
	if h == nil {
		g.homeTab.Drop(id)
	} else {
		g.homeTab.Set(id, h)
	}
	g.hostsChanged()
}
