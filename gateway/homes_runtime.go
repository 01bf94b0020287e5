package gateway

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// Homes registered through the admin API are stored with Dynamic set and
// what their registration needs (target, provider, version, relay token
// reference, idle timeout, probe). At start, after the config's homes,
// every stored dynamic home is registered again, unless the config declares
// a home with its id or its target: the config wins, and the conflict is
// logged (a config home with the id of a dynamic one takes the record over:
// it is no longer dynamic).

// rtRestore registers the stored dynamic homes and then the stored apps
// again; New calls it once the config's homes and apps are in place.
func (g *Gateway) rtRestore(ctx context.Context) error {
	if err := g.rtRestoreHomes(ctx); err != nil {
		return err
	}
	return g.rtRestoreApps(ctx)
}

// rtConfigHome reports whether the config declares home id.
func (g *Gateway) rtConfigHome(id string) bool {
	for _, hc := range g.cfg.Homes {
		if hc.ID == id {
			return true
		}
	}
	return false
}

func (g *Gateway) rtRestoreHomes(ctx context.Context) error {
	recs, err := g.store.ListHomes(ctx)
	if err != nil {
		return fmt.Errorf("restore homes: %w", err)
	}
	for _, rec := range recs {
		if !rec.Dynamic {
			continue
		}
		if g.rtConfigHome(rec.ID) {
			g.log.Warn("stored dynamic home not restored: the config declares a home with the same id, and the config wins", "home", rec.ID)
			if _, err := registry.UpdateHome(ctx, g.store, rec, g.cfg.Instance, func(h *registry.Home) { h.Dynamic = false }); err != nil {
				g.log.Warn("clear the dynamic mark of a config home", "home", rec.ID, "err", err)
			}
			continue
		}
		if other, ok := g.homeAt(rec.Target); ok {
			g.log.Warn("stored dynamic home not restored: its target is taken, and the config wins", "home", rec.ID,
				"target", rec.Target, "taken_by", other.spec.ID)
			continue
		}
		spec := wake.HomeSpec{ID: rec.ID, Target: rec.Target, Provider: rec.Provider, Version: rec.Version,
			IdleTimeout: rec.IdleTimeout, Probe: wake.ProbeKind(rec.Probe)}
		if spec.Probe == "" {
			spec.Probe = wake.ProbeKind(g.cfg.Wake.Probe.Kind)
		}
		hr := &homeRoute{spec: spec}
		if rec.RelayTokenRef != "" {
			tok, err := ResolveSecret(rec.RelayTokenRef)
			if err != nil {
				g.log.Warn("stored dynamic home not restored: relay_token", "home", rec.ID, "err", err)
				continue
			}
			hr.token, hr.spec.RelayToken = tok, tok
		}
		if err := g.engine.Register(ctx, hr.spec); err != nil {
			g.log.Warn("stored dynamic home not restored", "home", rec.ID, "err", err)
			continue
		}
		g.setHome(rec.ID, hr)
		g.log.Info("home restored", "home", rec.ID, "target", rec.Target)
	}
	return nil
}
