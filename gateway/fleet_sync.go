package gateway

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/provider"
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
// Each pass reads the store under the lock this gateway's own admin writes
// take (the registrar's LockHomes for homes, the route table's change for
// apps), so that it never sees a write of this gateway half done: a home
// stored but not yet registered, or an app being removed.

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
	g.syncFleetApps(ctx, true)
	if missing := g.syncFleetHomes(ctx); len(missing) > 0 {
		g.log.Warn("fleet: records of config homes are missing from the store; recording them again", "homes", missing)
		g.healHomes(ctx, missing)
	}
	g.syncFleetApps(ctx, false)
	g.syncAppStates(ctx)
}

// syncFleetHomes registers the stored dynamic homes this gateway does not
// route, registers again those whose routing changed (target, provider,
// idle timeout, probe, relay token), and forgets those whose record is
// gone. A home being woken here keeps its wake; only new wakes see the
// change. It returns the homes of the config that have no record.
func (g *Gateway) syncFleetHomes(ctx context.Context) (missing []string) {
	r := g.reg
	r.LockHomes()
	defer r.UnlockHomes()
	configHomes := r.ConfigHomes()
	recs, err := g.store.ListHomes(ctx)
	if err != nil {
		g.log.Warn("fleet: list homes", "err", err)
		return nil
	}
	stored := make(map[string]bool, len(recs))
	for _, rec := range recs {
		stored[rec.ID] = true
	}
	for id := range configHomes {
		if !stored[id] {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	var gone []string
	g.eachHome(func(h *homeRoute) bool {
		if id := h.spec.ID; !stored[id] && !configHomes[id] {
			gone = append(gone, id)
		}
		return true
	})
	for _, id := range gone {
		g.setHome(id, nil)
		g.engine.Forget(ctx, id)
		g.log.Info("fleet: home removed elsewhere is no longer served here", "home", id)
	}
	for _, rec := range recs {
		if !rec.Dynamic || configHomes[rec.ID] {
			continue
		}
		h, known := g.homeWithID(rec.ID)
		if known && g.sameRouting(h, rec) {
			continue
		}
		// Read it again just before registering: a home removed meanwhile
		// must not be registered (registering creates a missing record).
		cur, err := g.store.GetHome(ctx, rec.ID)
		if err != nil {
			if !errors.Is(err, registry.ErrNotFound) {
				g.log.Warn("fleet: read home", "home", rec.ID, "err", err)
			}
			continue
		}
		if known {
			g.log.Info("fleet: home changed elsewhere is registered again", "home", rec.ID, "target", cur.Target)
		}
		r.RestoreHome(ctx, cur, false)
	}
	return missing
}

// sameRouting reports whether h is registered as rec says: target,
// provider, settings (homedecl.go) and relay token.
func (g *Gateway) sameRouting(h *homeRoute, rec registry.Home) bool {
	if !control.SameSpec(h.spec, control.DeclSpec(control.DeclFromRecord(rec, &g.cfg.Wake), "")) {
		return false
	}
	token := ""
	if rec.RelayTokenRef != "" {
		var err error
		if token, err = provider.ResolveSecret(rec.RelayTokenRef); err != nil {
			return true // restoreHome would refuse it as well; keep what serves
		}
	}
	return token == h.token
}

// syncFleetApps removes the apps registered through the admin API whose
// record is gone (removals true), or installs the stored apps this gateway
// does not serve at their stored generation (removals false). A stored app
// whose home is not served here yet waits for the next pass.
func (g *Gateway) syncFleetApps(ctx context.Context, removals bool) {
	r, t := g.reg, g.routeTab
	t.change.Lock()
	defer t.change.Unlock()
	recs, err := g.store.ListApps(ctx)
	if err != nil {
		g.log.Warn("fleet: list apps", "err", err)
		return
	}
	if removals {
		stored := make(map[string]bool, len(recs))
		for _, rec := range recs {
			stored[rec.Slug] = true
		}
		for slug, ar := range t.all() {
			if ar.gen != 0 && !r.IsConfigApp(slug) && !stored[slug] {
				t.uninstall(slug)
				g.log.Info("fleet: app removed elsewhere is no longer served here", "app", slug)
			}
		}
		return
	}
	for _, rec := range recs {
		if r.AppConflict(control.FromStore, rec.Slug) != nil {
			continue
		}
		if cur := t.route(rec.Slug); cur != nil && cur.gen == rec.Generation {
			continue
		}
		ac := rec
		ac.Default()
		var bad []string
		ac.Check(r.HomeKnown, func(field, format string, args ...any) { bad = append(bad, field) })
		if len(bad) > 0 {
			g.log.Debug("fleet: stored app not installed yet", "app", rec.Slug, "fields", bad)
			continue
		}
		t.install(ac, rec.Generation)
		g.log.Info("fleet: app registered elsewhere is served here", "app", rec.Slug, "generation", rec.Generation)
	}
}
