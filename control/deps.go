package control

import (
	"context"
	"log/slog"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
)

// Route is one home's entry in the gateway's home table: what the request
// path needs of a home, built by the table (Homes.New) from the spec the
// registrar registered.
type Route interface {
	// Spec is the home as the engine registered it (its relay token
	// resolved).
	Spec() homes.Spec
}

// Homes is the gateway's route table of homes, by id and by target, as
// the registrar changes it. Every change is one home.
type Homes[H Route] interface {
	// New returns the route of spec, not yet in the table.
	New(spec homes.Spec) H
	// Set routes h in place of the home with id.
	Set(id string, h H)
	// Drop stops routing the home with id.
	Drop(id string)
	// WithID returns the route of the home with id.
	WithID(id string) (H, bool)
	// Count is how many homes are routed.
	Count() int
	// Each calls fn for every routed home, in no order, until it returns
	// false; fn may change the table.
	Each(fn func(h H) bool)
	// Forget drops what the request path holds for a removed home (its
	// connection counts).
	Forget(id string)
}

// Apps is the gateway's app route table as the registrar changes it. Its
// changes are serialised by Lock: the registrar holds it across the store
// write that goes with one.
type Apps interface {
	Lock()
	Unlock()
	// Install puts ac into the table as a candidate with stored
	// generation gen (0 for an app of the config), in place of any app
	// with its slug; the caller holds Lock and has checked ac.
	Install(ac registry.App, gen uint64)
	// Uninstall removes slug's route and stops observing it; the caller
	// holds Lock.
	Uninstall(slug string)
	// Generation returns the stored generation of the app served at slug
	// (0 for an app of the config); ok is false when none is.
	Generation(slug string) (gen uint64, ok bool)
	// Generations returns every app served, by slug, with its stored
	// generation (0 for an app of the config).
	Generations() map[string]uint64
	// InHome returns the slug of an app that runs in home id, if any.
	InHome(id string) (slug string, ok bool)
	// ApplyState records an operator's stored desired state of slug
	// (stopped or not) and applies it to the app served there; it
	// reports whether the app's desired state changed. It needs no Lock.
	ApplyState(slug string, stopped bool) (changed bool)
}

// Engine is what the registrar asks of the lifecycle engine.
type Engine interface {
	Register(ctx context.Context, s homes.Spec) error
	RegisterRead(ctx context.Context, s homes.Spec, rec registry.Home) error
	Remove(ctx context.Context, id string, generation uint64) error
	// Forget drops a home removed elsewhere in a fleet, stopping its
	// process where this gateway ran it.
	Forget(ctx context.Context, id string)
}

// Sessions counts who uses a home (sessions.Table): a reload does not
// remove a home in use.
type Sessions interface {
	Count(id string) int
}

// Deps is what the registrar works on: the engine, the store, the
// gateway's two route tables and its sessions.
type Deps[H Route] struct {
	Engine   Engine
	Store    registry.Store
	Homes    Homes[H]
	Apps     Apps
	Sessions Sessions
	// Avail are the providers this gateway built, by name.
	Avail []string
	Log   *slog.Logger
}
