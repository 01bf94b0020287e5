package control

import (
	"context"
	"log/slog"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/registry"
)

// FleetStore is a shared store with the fleet capability (registry.Fleet):
// what a Fleet reads and writes.
type FleetStore interface {
	registry.Store
	registry.Fleet
}

// FleetEngine is what a Fleet asks of the lifecycle engine.
type FleetEngine interface {
	// Heartbeat reports this gateway's sessions to the fleet now.
	Heartbeat(ctx context.Context, tick time.Duration)
	SetTarget(ctx context.Context, t registry.Target) (registry.Target, error)
	// RecordRun and Reseed record a config home again after the store
	// lost it: as run here, or as sleeping.
	RecordRun(ctx context.Context, id string) (bool, error)
	Reseed(ctx context.Context, id string) (bool, error)
	// StopRun stops the process of a home this gateway runs, for a peer.
	StopRun(ctx context.Context, id, ref string, suspend bool) (how string, proven bool, err error)
	// Release clears this gateway as the runner of homes ids.
	Release(ctx context.Context, ids []string)
	// Drop drops home id's warm verdict here.
	Drop(id string)
	Events() *events.Bus
}

// FleetOptions are a Fleet's inputs besides the engine and the registrar
// (Attach).
type FleetOptions struct {
	// Store is the fleet's shared store.
	Store FleetStore
	// Instance names this gateway in the fleet (the config's instance).
	Instance string
	// StopGrace is exec.stop_grace: a runner's stop of a home, asked by a
	// peer, takes up to twice it (SIGTERM, then SIGKILL).
	StopGrace time.Duration
	// IdleTick is the period of the engine's idle loop, which every
	// heartbeat reports.
	IdleTick time.Duration
	// RollTarget is the config's roll target, recorded again when the
	// store lost its data; its Version is "" when the config sets none.
	RollTarget registry.Target
	Log        *slog.Logger
}

// Fleet is this gateway's part in a fleet of gateways sharing one Redis:
// it keeps the gateway's homes and apps in line with the shared store
// (fleet_sync.go), heals a store that lost its data (fleet_heal.go),
// answers and asks the runners of machine-local homes (fleet_owner.go),
// shares dropped warm verdicts (fleet_verdicts.go) and stores operators'
// leases (fleet_leases.go).
//
// NewFleet builds it when the store opens, before the engine, which takes
// its Peers and Kick; Attach gives it the engine and the registrar once
// they exist; Run is its loop, which the gateway starts with its
// background work and stops (by Run's context) at step 5 of its shutdown
// order. Methods that say so may be called on a nil *Fleet: a gateway on
// its own store has none.
type Fleet[H Route] struct {
	o     FleetOptions
	store FleetStore
	log   *slog.Logger
	peers fleetPeers

	engine FleetEngine
	reg    *Registrar[H]

	// drops are the verdicts this gateway dropped, waiting to be
	// announced (fleet_verdicts.go).
	drops chan string
	// kick asks Run for a pass now.
	kick chan struct{}
	// notes are the fleet's warnings for the admin status.
	notes fleetNotes

	// Read and written by Run's goroutine only: the store's epoch as last
	// read (fleet_heal.go), the last heartbeat of a pass, this gateway's
	// version.
	epoch   string
	beat    time.Time
	version string
}

// NewFleet returns this gateway's part in the fleet of o.Store. It reads
// the store's epoch and says once, in the log and the admin status, when
// the fleet's Redis keeps nothing across its own restart.
func NewFleet[H Route](ctx context.Context, o FleetOptions) *Fleet[H] {
	f := &Fleet[H]{o: o, store: o.Store, log: o.Log,
		drops: make(chan string, fleetDropQueue), kick: make(chan struct{}, 1)}
	f.peers = fleetPeers{f: o.Store, instance: o.Instance, stopWait: 2*o.StopGrace + peerStopSlack}
	f.readEpoch(ctx)
	f.checkPersistence(ctx)
	return f
}

// Attach gives f the engine and the registrar, and from then on f answers
// what other gateways of the fleet ask this one. Call it once, before Run.
func (f *Fleet[H]) Attach(e FleetEngine, reg *Registrar[H]) {
	f.engine, f.reg = e, reg
	f.store.OnAsked(f.answerPeer)
}

// Peers are the fleet's live gateways and the runners of its homes, for
// the engine, which asks them who runs a home (ownership.Peers).
func (f *Fleet[H]) Peers() ownership.Peers { return &f.peers }

// Reports lists the live gateways of the fleet from their session reports
// (the heartbeat).
func (f *Fleet[H]) Reports(ctx context.Context) ([]registry.InstanceReport, error) {
	return f.store.Reports(ctx)
}

// Heartbeat reports this gateway's sessions to the fleet now, bounded by
// fleetSyncTimeout: a gateway's first report, before it serves. Call it
// after Attach.
func (f *Fleet[H]) Heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
	defer cancel()
	f.engine.Heartbeat(ctx, f.o.IdleTick)
}

// Warnings lists the fleet's warnings for the admin status; none on a nil
// *Fleet.
func (f *Fleet[H]) Warnings() []string {
	if f == nil {
		return nil
	}
	return f.notes.warnings()
}
