package gateway

import (
	"net/http"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/route"
)

// appTable is the app route table (control.AppTable over the request
// path's route.App) with the listener's side of its self-probes.
type appTable struct {
	*control.AppTable[*route.App]
	probe selfProbes
}

// newRouteTable returns an empty table with an observer of its own; the
// registrar installs the apps (control/apps.go). g's engine, store, homes
// and log are ready.
func newRouteTable(g *Gateway) *appTable {
	p := control.NewSelfProber(g.cfg.Proxy.DialTimeout)
	t := control.NewAppTable(control.AppTableOptions[*route.App]{Routes: appRoutes{g}, Engine: g.engine,
		Store: g.store, Instance: g.cfg.Instance, Prober: p, Draining: adminInstance{g}, Log: g.log})
	return &appTable{AppTable: t, probe: selfProbes{p}}
}

// appRoutes builds the request path's app routes over g's home table.
type appRoutes struct{ g *Gateway }

// NewApp returns the candidate route of ac: an app in a home gets the
// home routed now.
func (a appRoutes) NewApp(ac registry.App, gen uint64) *route.App {
	var home *route.Home
	if ac.Upstream == "" {
		home, _ = a.g.homeWithID(ac.Home)
	}
	return route.NewApp(ac, gen, home)
}

// selfProbes is the gateway's self-probe client (control.SelfProber) as
// the listener meets its requests: the prober proves that a request is its
// own, and the listener marks it for the request path (DESIGN rule 14).
type selfProbes struct{ *control.SelfProber }

// hygiene removes the probe header from r and, when r is one of the
// prober's own self-probes, marks its context (route.MarkSelfProbe).
func (p selfProbes) hygiene(r *http.Request) (*http.Request, bool) {
	if !p.Admit(r) {
		return r, false
	}
	return route.MarkSelfProbe(r), true
}

// Apps returns the app observer: statuses, refreshes, waits and the start,
// stop and restart operations (for the admin API).
func (g *Gateway) Apps() *appstatus.Apps { return g.routeTab.Observer() }

// AppRoute is one entry of the route table.
type AppRoute = control.RouteEntry

// Routes returns a snapshot of this instance's route table, by slug.
func (g *Gateway) Routes() []AppRoute { return g.routeTab.Routes() }

// appBySlug returns the app routed at /apps/{slug}.
func (g *Gateway) appBySlug(slug string) (*route.App, bool) { return g.routeTab.Lookup(slug) }

var (
	_ route.Apps                        = (*control.AppTable[*route.App])(nil)
	_ control.AppRouteMaker[*route.App] = appRoutes{}
)
