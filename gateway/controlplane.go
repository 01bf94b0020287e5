package gateway

import (
	"net/http"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/route"
)

// The gateway's side of the control plane (control/): the registrar
// changes the home table through a view of it and the app table
// (control.AppTable) directly.

// newRegistrar returns the registrar of g's engine, store and tables; g's
// engine, store, providers and log are ready.
func (g *Gateway) newRegistrar() *control.Registrar[*route.Home] {
	return control.NewRegistrar(control.Deps[*route.Home]{Engine: g.engine, Store: g.store,
		Homes: controlHomes{g}, Apps: g.routeTab.AppTable, Sessions: g.sessions, Avail: g.providers.names(), Log: g.log}, g.cfg)
}

// controlHomes is g's home table as the registrar changes it.
type controlHomes struct{ g *Gateway }

var _ control.Homes[*route.Home] = controlHomes{}

func (c controlHomes) New(spec homes.Spec) *route.Home {
	return route.NewHome(spec)
}
func (c controlHomes) Set(id string, h *route.Home)         { c.g.setHome(id, h) }
func (c controlHomes) Drop(id string)                       { c.g.setHome(id, nil) }
func (c controlHomes) WithID(id string) (*route.Home, bool) { return c.g.homeWithID(id) }
func (c controlHomes) Count() int                           { return c.g.homeCount() }
func (c controlHomes) Each(fn func(*route.Home) bool)       { c.g.eachHome(fn) }
func (c controlHomes) Forget(id string)                     { c.g.homeConns.Forget(id) }

// adminBackend returns the admin API's backend: the control plane over
// g's registrar, store, engine, tables and sessions. Serve builds it when
// the admin listener starts (the version is set by then).
func (g *Gateway) adminBackend() *adminapi.Backend[*route.Home] {
	d := adminapi.Deps[*route.Home]{Registrar: g.reg, Homes: controlHomes{g}, Store: g.store, Engine: g.engine,
		Sessions: g.sessions, Providers: g.providers, AppObserver: g.Apps(), AppRoutes: adminApps{g.routeTab.AppTable, g}, Leases: adminLeases{g},
		Reloader: g, Denials: g.denials, Instance: adminInstance{g},
		Name: g.cfg.Instance, Version: g.version, Started: g.started, Log: g.log}
	if g.fleet != nil { // a nil registry.Fleet, not a typed nil, tells "no fleet"
		d.Fleet = g.fleet
	}
	return adminapi.New(d)
}

// adminApps is g's app route table as the admin API reads it, with the
// apps' public URLs.
type adminApps struct {
	*control.AppTable[*route.App]
	g *Gateway
}

var _ adminapi.AppRoutes = adminApps{}

func (a adminApps) URL(slug string) string { return a.g.appURL(slug) }

// adminLeases keeps operators' leases in the fleet's store when there is
// one (control/fleet_leases.go), else among g's sessions.
type adminLeases struct{ g *Gateway }

var _ adminapi.Leases = adminLeases{}

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

var _ adminapi.InstanceState = adminInstance{}

func (i adminInstance) Draining() bool { return i.g.draining.Load() }

// BodyBudget is what request bodies read ahead hold against their budget.
func (i adminInstance) BodyBudget() admin.BodyBudget {
	b := i.g.proxy.BodyBudget()
	return admin.BodyBudget{UsedBytes: b.Used, Clients: b.Clients, PerClientBytes: b.PerClient,
		TotalBytes: b.Total, Refused: b.Refused}
}
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
func (g *Gateway) nameLost() bool          { return control.NameLost(g.store) }

// backupHandler serves GET /admin/store/backup (control/store.go).
func (g *Gateway) backupHandler() http.Handler { return control.BackupHandler(g.store, g.log) }
