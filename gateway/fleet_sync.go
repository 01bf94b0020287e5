package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// A gateway of a fleet serves the homes and apps that any gateway of the
// fleet registered through its admin API: syncFleet brings this gateway's
// tables in line with the shared store whenever a home or an app changes
// anywhere (and every fleetSyncFallback, for an announcement missed).
// Homes and apps of this gateway's config are the config's: the fleet
// neither replaces nor removes them. The roll target needs nothing here:
// the engine reads it from the store at every wake and roll.
//
// The registrar does the comparing (control/fleet.go): each pass reads the
// store under the lock this gateway's own admin writes take, so that it
// never sees a write of this gateway half done: a home stored but not yet
// registered, or an app being removed.

// fleetSyncFallback is how often a gateway of a fleet compares its homes
// and apps with the store when no change was announced.
const fleetSyncFallback = 5 * time.Second

// fleetSyncTimeout bounds one pass of syncFleet.
const fleetSyncTimeout = 10 * time.Second

// syncFleet keeps this gateway's homes and apps in line with the shared
// store, and shares its dropped verdicts (fleet_verdicts.go), until ctx
// ends. Nothing for a gateway on its own store.
func (g *Gateway) syncFleet(ctx context.Context) {
	if g.fleet == nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { g.shareVerdicts(ctx) })
	g.announceVersion(ctx)
	t := time.NewTimer(fleetSyncFallback)
	defer t.Stop()
	for {
		homes, apps := g.store.Changed(registry.AnyHomeKey), g.store.Changed(registry.AnyAppKey)
		select {
		case <-ctx.Done():
			return
		case <-homes:
		case <-apps:
		case <-g.fleetKick:
		case <-t.C:
			// Again on every fallback tick: a Redis that lost its data
			// (restarted without persistence) learns it back.
			g.announceVersion(ctx)
		}
		t.Reset(fleetSyncFallback)
		g.fleetPass(ctx)
	}
}

// announceVersion records this gateway's version in the fleet's store, for
// the fleet's instance list (`wakegate status`).
func (g *Gateway) announceVersion(ctx context.Context) {
	if g.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
	defer cancel()
	if err := g.fleet.SetVersion(ctx, g.cfg.Instance, g.version); err != nil && ctx.Err() == nil {
		g.log.Debug("fleet: record this gateway's version", "err", err)
	}
}

// fleetPass is one pass of syncFleet: apps removed elsewhere go first (an
// app may run in a home removed with it), then homes are added, replaced
// and removed, then apps are added and replaced.
func (g *Gateway) fleetPass(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
	defer cancel()
	// A pass follows the store's return after an outage (every waiter is
	// woken then): the heartbeat goes first, so that no gateway takes this
	// one's homes for orphans while its report is missing. Once a second
	// at most.
	if time.Since(g.fleetBeat) >= time.Second {
		g.fleetBeat = time.Now()
		g.engine.Heartbeat(ctx, idleTick(g.cfg))
	}
	g.checkEpoch(ctx)
	g.reg.SyncFleetApps(ctx, true)
	if missing := g.reg.SyncFleetHomes(ctx); len(missing) > 0 {
		g.log.Warn("fleet: records of config homes are missing from the store; recording them again", "homes", missing)
		g.healHomes(ctx, missing)
	}
	g.reg.SyncFleetApps(ctx, false)
	g.syncAppStates(ctx)
}
