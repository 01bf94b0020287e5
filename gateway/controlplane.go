package gateway

import (
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/route"
	"github.com/wakegate/wakegate/wake"
)

// The gateway's side of the control plane (control/): the registrar
// changes the two route tables through these views of them. The app table
// is built after the config's homes register (it needs them), so its view
// reads g.routeTab when called.

// newRegistrar returns the registrar of g's engine, store and tables; g's
// engine, store, providers and log are ready.
func (g *Gateway) newRegistrar() *control.Registrar[*route.Home] {
	return control.NewRegistrar(control.Deps[*route.Home]{Engine: g.engine, Store: g.store,
		Homes: controlHomes{g}, Apps: controlApps{g}, Sessions: g.sessions, Avail: g.providers.names(), Log: g.log}, g.cfg)
}

// controlHomes is g's home table as the registrar changes it.
type controlHomes struct{ g *Gateway }

var _ control.Homes[*route.Home] = controlHomes{}

func (c controlHomes) New(spec wake.HomeSpec) *route.Home {
	return route.NewHome(spec)
}
func (c controlHomes) Set(id string, h *route.Home)         { c.g.setHome(id, h) }
func (c controlHomes) Drop(id string)                       { c.g.setHome(id, nil) }
func (c controlHomes) WithID(id string) (*route.Home, bool) { return c.g.homeWithID(id) }
func (c controlHomes) Count() int                           { return c.g.homeCount() }
func (c controlHomes) Each(fn func(*route.Home) bool)       { c.g.eachHome(fn) }
func (c controlHomes) Forget(id string)                     { c.g.homeConns.Forget(id) }

// controlApps is g's app route table as the registrar changes it.
type controlApps struct{ g *Gateway }

var _ control.Apps = controlApps{}

func (c controlApps) Lock()                               { c.g.routeTab.change.Lock() }
func (c controlApps) Unlock()                             { c.g.routeTab.change.Unlock() }
func (c controlApps) Install(ac registry.App, gen uint64) { c.g.routeTab.install(ac, gen) }
func (c controlApps) Uninstall(slug string)               { c.g.routeTab.uninstall(slug) }

func (c controlApps) Generation(slug string) (uint64, bool) {
	if ar := c.g.routeTab.route(slug); ar != nil {
		return ar.Generation(), true
	}
	return 0, false
}

func (c controlApps) Generations() map[string]uint64 {
	all := c.g.routeTab.all()
	gens := make(map[string]uint64, len(all))
	for slug, ar := range all {
		gens[slug] = ar.Generation()
	}
	return gens
}

func (c controlApps) InHome(id string) (string, bool) {
	for _, ar := range c.g.routeTab.all() {
		if ar.Home() != nil && ar.Home().Spec().ID == id {
			return ar.Config().Slug, true
		}
	}
	return "", false
}
