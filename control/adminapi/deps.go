package adminapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wakerecord"
)

// Home is a home as the gateway's home table routes it (route.Home).
type Home interface {
	// Spec is the home as the engine registered it (its relay token
	// resolved).
	Spec() homes.Spec
}

// Homes is the gateway's home table as the admin API reads it; the
// registrar changes it.
type Homes[H Home] interface {
	// WithID returns the home with id.
	WithID(id string) (H, bool)
	// Count is how many homes are routed.
	Count() int
	// Each calls fn for every routed home, in no order, until it returns
	// false.
	Each(fn func(h H) bool)
}

// Registrar is the one path by which homes and apps join and leave the
// gateway (control.Registrar), as the admin API's writes use it.
type Registrar[H Home] interface {
	// WakeDefaults are the config's wake settings, which fill what a
	// home's declaration leaves out.
	WakeDefaults() *config.WakeConfig
	// CheckHome checks a home's declaration with the config's rules and
	// the providers this gateway built.
	CheckHome(d config.HomeDecl) []provider.Problem
	PutAPIHome(ctx context.Context, d config.HomeDecl, spec homes.Spec, ifMatch uint64) (h H, created bool, err error)
	RemoveHome(ctx context.Context, h H, ifMatch uint64) error
	AppFromRequest(slug string, ac registry.App) (registry.App, error)
	PutAPIApp(ctx context.Context, ac registry.App, ifMatch uint64) (gen uint64, created bool, err error)
	RemoveAPIApp(ctx context.Context, slug string, ifMatch uint64) error
}

// Deps is what the admin API reads and acts on, each a capability the
// gateway hands over at assembly.
type Deps[H Home] struct {
	// Registrar registers and removes homes and apps; Homes is the home
	// table it changes, the one the admin API lists.
	Registrar Registrar[H]
	Homes     Homes[H]
	// Store holds the homes' records (statuses, versions, wakes).
	Store    registry.Store
	Engine   Engine
	Sessions Sessions
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

// Engine is what the admin API asks of the lifecycle engine: what it knows
// of each home and the operator's actions on one.
type Engine interface {
	Warm(id string) bool
	Progress(id string) (phase string, elapsed time.Duration, ok bool)
	Brief(id string) (wakerecord.Brief, bool)
	LastWake(id string) *wakerecord.Record
	LastStop(id string) *homes.WakeStop
	WakeHistory(id string) []wakerecord.Record
	WakeNow(ctx context.Context, id, cause string) (homes.Awake, error)
	StartNow(id, cause string) error
	Suspend(ctx context.Context, id string) error
	Roll(ctx context.Context, id string) (registry.Home, error)
	Refresh(ctx context.Context, id string) (refresh.Result, error)
	Target(ctx context.Context) (registry.Target, error)
	SetTarget(ctx context.Context, t registry.Target) (registry.Target, error)
	Events() *events.Bus
}

// Sessions is what the admin API reads of the sessions counted on
// this gateway (sessions.Table).
type Sessions interface {
	Count(id string) int
	IdleSince(id string) time.Time
	Kinds(id string) sessions.Kinds
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

// AppRoutes is the app route table as the admin API reads it.
type AppRoutes interface {
	// Served returns the app served at slug.
	Served(slug string) (control.ServedApp, bool)
	// AllServed returns every app served, in no order.
	AllServed() []control.ServedApp
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
