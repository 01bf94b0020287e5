package control

import (
	"context"
	"sync"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// A gateway of a fleet serves the homes and apps that any gateway of the
// fleet registered through its admin API: Run brings this gateway's
// tables in line with the shared store whenever a home or an app changes
// anywhere (and every fleetSyncFallback, for an announcement missed).
// Homes and apps of this gateway's config are the config's: the fleet
// neither replaces nor removes them. The roll target needs nothing here:
// the engine reads it from the store at every wake and roll.
//
// The registrar does the comparing (registrar_fleet.go): each pass reads
// the store under the lock this gateway's own admin writes take, so that
// it never sees a write of this gateway half done: a home stored but not
// yet registered, or an app being removed.

// fleetSyncFallback is how often a gateway of a fleet compares its homes
// and apps with the store when no change was announced.
const fleetSyncFallback = 5 * time.Second

// fleetSyncTimeout bounds one pass of Run.
const fleetSyncTimeout = 10 * time.Second

// Run keeps this gateway's homes and apps in line with the shared store,
// and shares its dropped verdicts (fleet_verdicts.go), until ctx ends; it
// returns once what it started has ended. version is this gateway's
// version, for the fleet's instance list. Call it after Attach, once.
func (f *Fleet[H]) Run(ctx context.Context, version string) {
	f.version = version
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { f.shareVerdicts(ctx) })
	f.announceVersion(ctx)
	t := time.NewTimer(fleetSyncFallback)
	defer t.Stop()
	for {
		homes, apps := f.store.Changed(registry.AnyHomeKey), f.store.Changed(registry.AnyAppKey)
		select {
		case <-ctx.Done():
			return
		case <-homes:
		case <-apps:
		case <-f.kick:
		case <-t.C:
			// Again on every fallback tick: a Redis that lost its data
			// (restarted without persistence) learns it back.
			f.announceVersion(ctx)
		}
		t.Reset(fleetSyncFallback)
		f.pass(ctx)
	}
}

// announceVersion records this gateway's version in the fleet's store, for
// the fleet's instance list (`wakegate status`).
func (f *Fleet[H]) announceVersion(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
	defer cancel()
	if err := f.store.SetVersion(ctx, f.o.Instance, f.version); err != nil && ctx.Err() == nil {
		f.log.Debug("fleet: record this gateway's version", "err", err)
	}
}

// pass is one pass of Run: apps removed elsewhere go first (an
// app may run in a home removed with it), then homes are added, replaced
// and removed, then apps are added and replaced.
func (f *Fleet[H]) pass(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
	defer cancel()
	// A pass follows the store's return after an outage (every waiter is
	// woken then): the heartbeat goes first, so that no gateway takes this
	// one's homes for orphans while its report is missing. Once a second
	// at most.
	if time.Since(f.beat) >= time.Second {
		f.beat = time.Now()
		f.engine.Heartbeat(ctx, f.o.IdleTick)
	}
	f.checkEpoch(ctx)
	f.reg.SyncFleetApps(ctx, true)
	if missing := f.reg.SyncFleetHomes(ctx); len(missing) > 0 {
		f.log.Warn("fleet: records of config homes are missing from the store; recording them again", "homes", missing)
		f.healHomes(ctx, missing)
	}
	f.reg.SyncFleetApps(ctx, false)
	f.reg.SyncAppStates(ctx)
}
