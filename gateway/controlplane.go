package gateway

import (
	"net/http"
	"time"

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

// controlApps is g's app route table as the registrar changes it: the
// table is built after the config's homes register (its routes need
// them), so the view reads g.routeTab when called.
type controlApps struct{ g *Gateway }

var _ control.Apps = controlApps{}

func (c controlApps) Lock()                               { c.g.routeTab.Lock() }
func (c controlApps) Unlock()                             { c.g.routeTab.Unlock() }
func (c controlApps) Install(ac registry.App, gen uint64) { c.g.routeTab.Install(ac, gen) }
func (c controlApps) Uninstall(slug string)               { c.g.routeTab.Uninstall(slug) }
func (c controlApps) Generation(slug string) (uint64, bool) {
	return c.g.routeTab.Generation(slug)
}
func (c controlApps) Generations() map[string]uint64 { return c.g.routeTab.Generations() }
func (c controlApps) ApplyState(slug string, stopped bool) bool {
	return c.g.routeTab.ApplyState(slug, stopped)
}
func (c controlApps) InHome(id string) (string, bool) { return c.g.routeTab.InHome(id) }

// adminBackend returns the admin API's backend: the control plane over
// g's registrar, store, engine, tables and sessions. Serve builds it when
// the admin listener starts (the version is set by then).
func (g *Gateway) adminBackend() *control.AdminAPI[*route.Home] {
	d := control.AdminDeps[*route.Home]{Registrar: g.reg, Store: g.store, Engine: g.engine, Sessions: g.sessions,
		Providers: g.providers, AppObserver: g.Apps(), AppRoutes: adminApps{g}, Leases: adminLeases{g},
		Reloader: g, Denials: g.denials, Instance: adminInstance{g},
		Name: g.cfg.Instance, Version: g.version, Started: g.started, Log: g.log}
	if g.fleet != nil { // a nil registry.Fleet, not a typed nil, tells "no fleet"
		d.Fleet = g.fleet
	}
	return control.NewAdminAPI(d)
}

// adminApps is g's app route table as the admin API reads it.
type adminApps struct{ g *Gateway }

var _ control.AppRoutes = adminApps{}

func (a adminApps) Served(slug string) (control.ServedApp, bool) {
	ar, ok := a.g.appBySlug(slug)
	if !ok {
		return control.ServedApp{}, false
	}
	return control.ServedApp{App: *ar.Config(), Generation: ar.Generation()}, true
}

func (a adminApps) AllServed() []control.ServedApp {
	all := a.g.routeTab.All()
	out := make([]control.ServedApp, 0, len(all))
	for _, ar := range all {
		out = append(out, control.ServedApp{App: *ar.Config(), Generation: ar.Generation()})
	}
	return out
}

func (a adminApps) Published(slug string) bool {
	return a.g.routeTab.Published(slug)
}

func (a adminApps) URL(slug string) string { return a.g.appURL(slug) }

// adminLeases keeps operators' leases in the fleet's store when there is
// one (control/fleet_leases.go), else among g's sessions.
type adminLeases struct{ g *Gateway }

var _ control.Leases = adminLeases{}

func (l adminLeases) AddLease(id string, ttl time.Duration) (uint64, error) {
	if lease, ok, err := l.g.fleet.AddLease(id, ttl); ok {
		return lease, err
	}
	return l.g.sessions.Lease(id, ttl), nil
}

func (l adminLeases) EndLease(id string, lease uint64) (bool, error) {
	live, ok, err := l.g.fleet.EndLease(id, lease)
	if ok {
		return live, err
	}
	return l.g.sessions.EndLease(id, lease), nil
}

// adminInstance is g's own state as the admin status shows it.
type adminInstance struct{ g *Gateway }

var _ control.InstanceState = adminInstance{}

func (i adminInstance) Draining() bool   { return i.g.draining.Load() }
func (i adminInstance) Degraded() string { return i.g.storeDegraded() }

// Warnings are what the configuration leaves shared between tenants and
// the fleet's notes.
func (i adminInstance) Warnings() []string {
	w := i.g.isolationWarnings()
	if s := i.g.sharedUserWarning(); s != "" {
		w = append(w, s)
	}
	return append(w, i.g.fleet.Warnings()...)
}

// dropVerdict drops home id's warm verdict here and, in a fleet, has the
// other gateways drop theirs (control/fleet_verdicts.go).
func (g *Gateway) dropVerdict(id string) {
	if g.fleet != nil {
		g.fleet.DropVerdict(id)
		return
	}
	g.engine.Drop(id)
}

// storeUnwritable, degraded and storeDegraded say why the store cannot
// serve, for /readyz and the admin status (control/store_watch.go).
func (g *Gateway) storeUnwritable() string { return control.StoreUnwritable(g.store) }
func (g *Gateway) degraded() string        { return control.StoreUnavailable(g.store) }
func (g *Gateway) storeDegraded() string   { return control.StoreDegraded(g.store) }

// backupHandler serves GET /admin/store/backup (control/store.go).
func (g *Gateway) backupHandler() http.Handler { return control.BackupHandler(g.store, g.log) }
