package control

import (
	"context"
	"errors"
	"slices"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// A gateway of a fleet serves the homes and apps any gateway of the fleet
// registered through its admin API: the gateway's fleet pass
// (Fleet, fleet_sync.go) calls these to bring its tables in line with
// the shared store. Each holds the lock this gateway's own admin writes
// take (claimMu for homes, the app table's lock for apps), so that it
// never sees a write of this gateway half done. Homes and apps of the
// config are the config's: a sync neither replaces nor removes them.

// SyncFleetHomes registers the stored dynamic homes this gateway does not
// route, registers again those whose routing changed (target, provider,
// idle timeout, probe, relay token), and forgets those whose record is
// gone. A home being woken here keeps its wake; only new wakes see the
// change. It returns the homes of the config that have no record.
func (r *Registrar[H]) SyncFleetHomes(ctx context.Context) (missing []string) {
	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	configHomes := r.configHomes
	recs, err := r.d.Store.ListHomes(ctx)
	if err != nil {
		r.d.Log.Warn("fleet: list homes", "err", err)
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
	r.d.Homes.Each(func(h H) bool {
		if id := h.Spec().ID; !stored[id] && !configHomes[id] {
			gone = append(gone, id)
		}
		return true
	})
	for _, id := range gone {
		r.d.Homes.Drop(id)
		r.d.Engine.Forget(ctx, id)
		r.d.Log.Info("fleet: home removed elsewhere is no longer served here", "home", id)
	}
	for _, rec := range recs {
		if !rec.Dynamic || configHomes[rec.ID] {
			continue
		}
		h, known := r.d.Homes.WithID(rec.ID)
		if known && r.sameRouting(h.Spec(), rec) {
			continue
		}
		// Read it again just before registering: a home removed meanwhile
		// must not be registered (registering creates a missing record).
		cur, err := r.d.Store.GetHome(ctx, rec.ID)
		if err != nil {
			if !errors.Is(err, registry.ErrNotFound) {
				r.d.Log.Warn("fleet: read home", "home", rec.ID, "err", err)
			}
			continue
		}
		if known {
			r.d.Log.Info("fleet: home changed elsewhere is registered again", "home", rec.ID, "target", cur.Target)
		}
		r.restoreHome(ctx, cur, false)
	}
	return missing
}

// sameRouting reports whether spec is registered as rec says: target,
// provider, settings (decl.go) and relay token.
func (r *Registrar[H]) sameRouting(spec homes.Spec, rec registry.Home) bool {
	if !SameSpec(spec, DeclSpec(DeclFromRecord(rec, &r.cfg.Wake), "")) {
		return false
	}
	token := ""
	if rec.RelayTokenRef != "" {
		var err error
		if token, err = provider.ResolveSecret(rec.RelayTokenRef); err != nil {
			return true // restoreHome would refuse it as well; keep what serves
		}
	}
	return token == spec.RelayToken
}

// SyncFleetApps removes the apps registered through the admin API whose
// record is gone (removals true), or installs the stored apps this gateway
// does not serve at their stored generation (removals false). A stored app
// whose home is not served here yet waits for the next pass.
func (r *Registrar[H]) SyncFleetApps(ctx context.Context, removals bool) {
	t := r.d.Apps
	t.Lock()
	defer t.Unlock()
	recs, err := r.d.Store.ListApps(ctx)
	if err != nil {
		r.d.Log.Warn("fleet: list apps", "err", err)
		return
	}
	if removals {
		stored := make(map[string]bool, len(recs))
		for _, rec := range recs {
			stored[rec.Slug] = true
		}
		for slug, gen := range t.Generations() {
			if gen != 0 && !r.configApps[slug] && !stored[slug] {
				t.Uninstall(slug)
				r.d.Log.Info("fleet: app removed elsewhere is no longer served here", "app", slug)
			}
		}
		return
	}
	for _, rec := range recs {
		if r.AppConflict(FromStore, rec.Slug) != nil {
			continue
		}
		if gen, ok := t.Generation(rec.Slug); ok && gen == rec.Generation {
			continue
		}
		ac := rec
		ac.Default()
		var bad []string
		ac.Check(r.HomeKnown, func(field, format string, args ...any) { bad = append(bad, field) })
		if len(bad) > 0 {
			r.d.Log.Debug("fleet: stored app not installed yet", "app", rec.Slug, "fields", bad)
			continue
		}
		t.Install(ac, rec.Generation)
		r.d.Log.Info("fleet: app registered elsewhere is served here", "app", rec.Slug, "generation", rec.Generation)
	}
}

// SyncAppStates applies the apps' desired states another gateway of the
// fleet stored (an operator's `wakegate app stop` there).
func (r *Registrar[H]) SyncAppStates(ctx context.Context) {
	recs, err := r.d.Store.ListAppStates(ctx)
	if err != nil {
		r.d.Log.Warn("fleet: list the apps' desired states", "err", err)
		return
	}
	for _, rec := range recs {
		if r.d.Apps.ApplyState(rec.Slug, rec.Stopped()) {
			r.d.Log.Info("fleet: app desired state changed elsewhere", "app", rec.Slug, "desired_state", rec.DesiredState)
		}
	}
}
