package gateway

import (
	"context"
	"github.com/wakegate/wakegate/route"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// A fleet's Redis that lost its data (restarted without an append-only
// file or snapshots, or flushed) heals from what the gateways declare and
// run, without a restart (DESIGN rule 28):
//
//   - each gateway remembers the store's epoch (registry's Epoch). At every
//     fleet pass (a change, the subscription coming back after an outage,
//     a wake that found a record missing, and every fleetSyncFallback) it
//     reads it again; a new value means the records are gone;
//   - the gateway then reports its heartbeat at once (so that the others
//     do not take its homes for orphans), records again the machine-local
//     homes whose processes it runs (it is their runner), the claims of
//     its config's targets and the config's roll target; after
//     healOwnersFirst it creates the records of its config's homes that
//     nobody recreated, as sleeping homes;
//   - homes and apps registered through the admin API cannot be rebuilt
//     from a config: each gateway that still serves them names them in its
//     log and in `wakegate status` before the fleet pass forgets them;
//     the gateway that ran such a home's process stops it then
//     (wake's Engine.Forget).
//
// A config home whose record is missing while the epoch stands (removed by
// hand) is healed the same way, without the report.

// healOwnersFirst is the pause between the runners' records and the
// sleeping ones, so that a home that runs somewhere is recorded as such
// before another gateway could start a second copy of it.
const healOwnersFirst = time.Second

// readEpoch remembers the store's epoch at start.
func (g *Gateway) readEpoch(ctx context.Context) {
	ep, err := g.fleet.Epoch(ctx)
	if err != nil {
		g.log.Warn("fleet: read the store's epoch", "err", err)
		return
	}
	g.fleetEpoch = ep
}

// checkPersistence reads what the fleet's Redis keeps across its own
// restart and, when it keeps nothing, says once what a restart would lose,
// in the log and in the admin status.
func (g *Gateway) checkPersistence(ctx context.Context, r registry.Fleet) {
	p, err := r.Persistence(ctx)
	if err != nil {
		g.log.Warn("fleet: read the persistence settings of Redis", "err", err)
		return
	}
	if !p.Known {
		g.log.Info("fleet: Redis does not let its persistence settings be read (CONFIG); make sure it keeps its data across a restart")
		return
	}
	if p.Keeps() {
		return
	}
	msg := "the fleet's Redis keeps nothing across its own restart (appendonly no, no save points): " +
		"a restart of Redis loses the homes and apps registered through the admin API, roll targets set through it, " +
		"operator leases and session counts; homes and apps of the config are recorded again by the gateways by themselves. " +
		"Run Redis with appendonly yes (or save points) to keep them"
	g.log.Error("fleet: NO PERSISTENCE: " + msg)
	g.fleetNotes.persistence.Store(&msg)
}

// checkEpoch reads the store's epoch and heals the store when it changed.
// It runs on syncFleet's goroutine.
func (g *Gateway) checkEpoch(ctx context.Context) {
	ep, err := g.fleet.Epoch(ctx)
	if err != nil {
		return // the pass's own reads say it
	}
	if g.fleetEpoch == "" || g.fleetEpoch == ep {
		g.fleetEpoch = ep
		return
	}
	g.fleetEpoch = ep
	t0 := time.Now()
	g.log.Error("fleet: the store lost its data (its epoch changed: Redis restarted without persistence, or was flushed); " +
		"recording again the homes this gateway runs and its config's homes, targets and roll target")
	g.engine.Heartbeat(ctx, idleTick(g.cfg))
	g.announceVersion(ctx)
	g.reportLost(ctx)
	g.healHomes(ctx, g.reg.ConfigHomeIDs())
	if rt := g.cfg.Roll.Target; rt.Version != "" {
		if _, err := g.engine.SetTarget(ctx, registry.Target{Version: rt.Version, Command: rt.Command, Image: rt.Image}); err != nil {
			g.log.Warn("fleet: record the config's roll target again", "err", err)
		}
	}
	g.log.Info("fleet: the store is healed from this gateway's homes", "ms", time.Since(t0).Milliseconds())
}

// healHomes records again the homes ids (of the config) whose records are
// missing: those whose processes this gateway runs at once, with their
// targets' claims, the others as sleeping homes after healOwnersFirst.
func (g *Gateway) healHomes(ctx context.Context, ids []string) {
	var rest []string
	for _, id := range ids {
		h, ok := g.homeWithID(id)
		if !ok {
			continue
		}
		if _, err := g.reg.ClaimConfigTarget(ctx, id, h.Spec().Target); err != nil {
			g.log.Warn("fleet: claim a config home's target again", "home", id, "err", err)
		}
		runs, err := g.engine.RecordRun(ctx, id)
		switch {
		case err != nil:
			g.log.Warn("fleet: record a home this gateway runs", "home", id, "err", err)
		case runs:
			g.log.Info("fleet: home recorded again as run by this gateway", "home", id)
		default:
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return
	}
	t := time.NewTimer(healOwnersFirst)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	created := 0
	for _, id := range rest {
		ok, err := g.engine.Reseed(ctx, id)
		if err != nil {
			g.log.Warn("fleet: record a config home again", "home", id, "err", err)
		}
		if ok {
			created++
		}
	}
	if created > 0 {
		g.log.Info("fleet: config homes recorded again as sleeping", "homes", created)
	}
}

// reportLost names the homes and apps registered through the admin API
// that this gateway serves and whose records are gone: no config can
// bring them back.
func (g *Gateway) reportLost(ctx context.Context) {
	recs, err := g.store.ListHomes(ctx)
	if err != nil {
		return
	}
	stored := make(map[string]bool, len(recs))
	for _, rec := range recs {
		stored[rec.ID] = true
	}
	config := map[string]bool{}
	for _, id := range g.reg.ConfigHomeIDs() {
		config[id] = true
	}
	var homes []string
	g.eachHome(func(h *route.Home) bool {
		if id := h.Spec().ID; !config[id] && !stored[id] {
			homes = append(homes, id)
		}
		return true
	})
	var apps []string
	g.routeTab.change.Lock()
	defer g.routeTab.change.Unlock()
	if stored, err := g.store.ListApps(ctx); err == nil {
		have := make(map[string]bool, len(stored))
		for _, a := range stored {
			have[a.Slug] = true
		}
		for slug, ar := range g.routeTab.all() {
			if ar.Generation() != 0 && !g.reg.IsConfigApp(slug) && !have[slug] {
				apps = append(apps, slug)
			}
		}
	}
	if len(homes)+len(apps) == 0 {
		return
	}
	slices.Sort(homes)
	slices.Sort(apps)
	var parts []string
	if len(homes) > 0 {
		parts = append(parts, "homes "+strings.Join(homes, ", "))
	}
	if len(apps) > 0 {
		parts = append(parts, "apps "+strings.Join(apps, ", "))
	}
	msg := "the fleet's store lost what was registered through the admin API: " + strings.Join(parts, "; ") +
		" (register them again: wakegate home put / app put, or PUT /admin/homes/{id})"
	g.log.Error("fleet: "+msg, "homes", homes, "apps", apps)
	g.fleetNotes.lost.Store(&msg)
}

// atomicString is a string set once by one goroutine and read by others.
type atomicString = atomic.Pointer[string]

// fleetNotes are the fleet's warnings for the admin status.
type fleetNotes struct {
	persistence atomicString
	lost        atomicString
}

// warnings lists the notes that are set.
func (n *fleetNotes) warnings() []string {
	var out []string
	for _, p := range []*atomicString{&n.persistence, &n.lost} {
		if s := p.Load(); s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// kickFleet asks syncFleet for a pass now (a wake found a record missing).
func (g *Gateway) kickFleet(string) {
	select {
	case g.fleetKick <- struct{}{}:
	default:
	}
}
