package control

import (
	"context"
	"log/slog"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
	"github.com/wakegate/wakegate/wakerecord"
)

// The admin API's backend (admin.Backend) is the control plane itself:
// AdminAPI answers the operator's reads and writes from the route tables,
// the registrar, the engine and the store. The adminapi*.go files are the
// only ones of this package that know package admin: they turn its
// requests into the control plane's own declarations (config.HomeDecl, registry.App)
// and its answers into admin's views.

// AdminAPI is the control plane as package admin sees it. Build it with
// NewAdminAPI; it holds no state of its own beyond its dependencies.
type AdminAPI[H Route] struct {
	d AdminDeps[H]
}

// AdminDeps is what the admin API reads and acts on, each a capability the
// gateway hands over at assembly.
type AdminDeps[H Route] struct {
	// Registrar registers and removes homes and apps; its home table is
	// the one the admin API lists.
	Registrar *Registrar[H]
	// Store holds the homes' records (statuses, versions, wakes).
	Store    registry.Store
	Engine   WakeEngine
	Sessions SessionView
	// Providers are the providers the gateway built, by name: their
	// optional capabilities (logs, restarts, usage, containment) add to a
	// home's detail.
	Providers map[string]provider.Provider
	// AppObserver is the observer of the apps (appstatus.Apps); AppRoutes the
	// app route table.
	AppObserver AppObserver
	AppRoutes   AppRoutes
	Leases      Leases
	// Fleet lists the fleet's live gateways; nil for a gateway on its own
	// store.
	Fleet    FleetReports
	Reloader Reloader
	// Denials are the request path's last access refusals.
	Denials *Denials
	// Instance is what the status route says of the gateway itself.
	Instance InstanceState
	// Name, Version and Started name the instance for the status route.
	Name, Version string
	Started       time.Time
	Log           *slog.Logger
}

// WakeEngine is what the admin API asks of the wake engine (wake.Engine):
// what it knows of each home and the operator's actions on one.
type WakeEngine interface {
	Warm(id string) bool
	Progress(id string) (phase string, elapsed time.Duration, ok bool)
	Brief(id string) (wakerecord.Brief, bool)
	LastWake(id string) *wakerecord.Record
	LastStop(id string) *wake.WakeStop
	WakeHistory(id string) []wakerecord.Record
	WakeNow(ctx context.Context, id, cause string) (wake.Awake, error)
	StartNow(id, cause string) error
	Suspend(ctx context.Context, id string) error
	Roll(ctx context.Context, id string) (registry.Home, error)
	Refresh(ctx context.Context, id string) (refresh.Result, error)
	Target(ctx context.Context) (registry.Target, error)
	SetTarget(ctx context.Context, t registry.Target) (registry.Target, error)
	Events() *events.Bus
}

// SessionView is what the admin API reads of the sessions counted on
// this gateway (proxy.Sessions).
type SessionView interface {
	Count(id string) int
	IdleSince(id string) time.Time
	Kinds(id string) proxy.SessionKinds
}

// AppObserver is what the admin API asks of the app observer (appstatus.Apps):
// statuses, observations and operations.
type AppObserver interface {
	List() []appstatus.Status
	Status(slug string) (appstatus.Status, bool)
	PhaseHistory(slug string) []appstatus.PhaseChange
	Schedule(slug string) (appstatus.ObserveSchedule, bool)
	Refresh(ctx context.Context, slug string, waitFor appstatus.Phase) (appstatus.Status, error)
	Start(ctx context.Context, slug string, budget time.Duration) (appstatus.Status, error)
	Stop(ctx context.Context, slug string, budget time.Duration) (appstatus.Status, error)
	Restart(ctx context.Context, slug string, budget time.Duration) (appstatus.Status, error)
}

var _ AppObserver = (*appstatus.Apps)(nil)

// ServedApp is an app the route table serves: as registered, with its
// stored generation (0 for an app of the config).
type ServedApp struct {
	App        registry.App
	Generation uint64
}

// AppRoutes is the app route table as the admin API reads it.
type AppRoutes interface {
	// Served returns the app served at slug.
	Served(slug string) (ServedApp, bool)
	// AllServed returns every app served, in no order.
	AllServed() []ServedApp
	// Published reports whether slug's route passed its self-probe.
	Published(slug string) bool
	// URL is where the public reaches the app at slug.
	URL(slug string) string
}

// Leases holds operators' leases on homes: in the fleet's store when there
// is one (every gateway counts them), else in this gateway's sessions.
type Leases interface {
	AddLease(id string, ttl time.Duration) (uint64, error)
	// EndLease ends a lease and reports whether it was live.
	EndLease(id string, lease uint64) (live bool, err error)
}

// FleetReports lists the session reports of the fleet's live gateways
// (registry.Fleet).
type FleetReports interface {
	Reports(ctx context.Context) ([]registry.InstanceReport, error)
}

var _ FleetReports = registry.Fleet(nil)

// Reloader reads the config file again and applies it (the gateway's
// Reload, which swaps what lies outside the control plane too).
type Reloader interface {
	Reload(ctx context.Context, opts admin.ReloadOptions) (admin.Reload, error)
}

// InstanceState is the gateway's own state for the status route.
type InstanceState interface {
	// Draining reports whether the gateway shuts down.
	Draining() bool
	// Degraded says why the fleet's store does not answer, "" while it
	// does.
	Degraded() string
	// Warnings are what an operator should know, one sentence each with
	// the way out.
	Warnings() []string
}

// NewAdminAPI returns the admin API's backend over d.
func NewAdminAPI[H Route](d AdminDeps[H]) *AdminAPI[H] { return &AdminAPI[H]{d: d} }

// About reports the instance for GET /admin/status.
func (a *AdminAPI[H]) About() admin.About {
	in := a.d.Instance
	ab := admin.About{Instance: a.d.Name, Version: a.d.Version, StartedAt: a.d.Started, Draining: in.Draining(),
		Degraded: in.Degraded(), Warnings: in.Warnings()}
	if c, ok := a.d.Providers["exec"].(provider.ContainmentReporter); ok {
		mode, why := c.Containment()
		if mode == "" {
			mode = "process group only"
		}
		ab.Containment = string(mode) + ": " + why
	}
	if b, ok := in.(interface{ BodyBudget() admin.BodyBudget }); ok {
		bb := b.BodyBudget()
		ab.BodyBudget = &bb
	}
	return ab
}

// Events returns the engine's event bus.
func (a *AdminAPI[H]) Events() *events.Bus { return a.d.Engine.Events() }

// FleetInstances lists the live gateways of the fleet from their session
// reports (the heartbeat), for the admin status; nil for a gateway on its
// own store.
func (a *AdminAPI[H]) FleetInstances(ctx context.Context) ([]admin.FleetInstance, error) {
	if a.d.Fleet == nil {
		return nil, nil
	}
	reps, err := a.d.Fleet.Reports(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]admin.FleetInstance, 0, len(reps))
	for _, rep := range reps {
		fi := admin.FleetInstance{Instance: rep.Instance, Version: rep.Version, Homes: rep.Sessions,
			HeartbeatAgeS: max(now.Sub(rep.ReportedAt), 0).Round(time.Millisecond).Seconds()}
		for _, n := range rep.Sessions {
			fi.Sessions += n
		}
		out = append(out, fi)
	}
	return out, nil
}

// Admin is s as the admin API answers it.
func (s *ReloadSummary) Admin() admin.Reload {
	return admin.Reload{File: s.File, HomesAdded: s.HomesAdded, HomesChanged: s.HomesChanged,
		HomesRemoved: s.HomesRemoved, HomesKept: s.HomesKept, AppsAdded: s.AppsAdded,
		AppsChanged: s.AppsChanged, AppsRemoved: s.AppsRemoved, Applied: s.Applied, NeedRestart: s.NeedRestart}
}

// Reload reads the config file again and applies it (admin.Reloader).
func (a *AdminAPI[H]) Reload(ctx context.Context, opts admin.ReloadOptions) (admin.Reload, error) {
	return a.d.Reloader.Reload(ctx, opts)
}

var (
	_ admin.Backend   = (*AdminAPI[Route])(nil)
	_ admin.HomePager = (*AdminAPI[Route])(nil)
	_ admin.Denials   = (*AdminAPI[Route])(nil)
	_ admin.Fleet     = (*AdminAPI[Route])(nil)
	_ admin.Reloader  = (*AdminAPI[Route])(nil)
)
