package gateway

import (
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/route"
)

// newPath builds the request path (route.Path) over g's tables, engine,
// data plane and gate; they are all ready.
func (g *Gateway) newPath() *route.Path {
	c := g.cfg
	return route.New(route.Options{Homes: &g.homeTab, Apps: g.routeTab.AppTable, Observer: g.routeTab.Observer(),
		Engine: g.engine, Sessions: g.sessions, Proxy: g.proxy, Conns: g.homeConns, Gate: g.gate,
		Records: g.store, Verdicts: verdicts{g}, Log: g.log, Drain: g.drainStarted,
		RelayHeader: c.Proxy.RelayHeader, RootRedirect: c.Server.RootRedirect,
		AppsDomain: c.Hosts.AppsDomain, NodesDomain: c.Hosts.NodesDomain, Settings: routeSettings(c)})
}

// routeSettings are the request path's reloadable settings in c.
func routeSettings(c *config.Config) route.Settings {
	return route.Settings{Hold: c.Wake.Hold, WakeTimeout: c.Wake.WakeTimeout, RetryAfter: c.Wake.RetryAfter,
		ReadyTimeout: c.Wake.ReadyTimeout, HomeResponseHeaderTimeout: c.Proxy.HomeResponseHeaderTimeout,
		NoWakePaths: c.Wake.NoWakePaths, NoWakeAgents: c.Wake.NoWakeAgents(), Waiting: c.Wake.WaitingTemplate(),
		Names: c}
}

// verdicts drops warm verdicts for the request path: here and, in a
// fleet, on the other gateways (fleet_verdicts.go).
type verdicts struct{ g *Gateway }

func (v verdicts) Drop(id string) { v.g.dropVerdict(id) }

var (
	_ route.Homes       = (*control.HomeTable[*route.Home])(nil)
	_ route.HomeRecords = registry.Store(nil)
	_ route.Verdicts    = verdicts{}
	_ route.ClientSlots = (*edge.ConnLimit)(nil)
)
