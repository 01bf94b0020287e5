package control

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"
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
func (f *Fleet[H]) readEpoch(ctx context.Context) {
	ep, err := f.store.Epoch(ctx)
	if err != nil {
		f.log.Warn("fleet: read the store's epoch", "err", err)
		return
	}
	f.epoch = ep
}

// checkPersistence reads what the fleet's Redis keeps across its own
// restart and, when it keeps nothing, says once what a restart would lose,
// in the log and in the admin status.
func (f *Fleet[H]) checkPersistence(ctx context.Context) {
	p, err := f.store.Persistence(ctx)
	if err != nil {
		f.log.Warn("fleet: read the persistence settings of Redis", "err", err)
		return
	}
	if !p.Known {
		f.log.Info("fleet: Redis does not let its persistence settings be read (CONFIG); make sure it keeps its data across a restart")
		return
	}
	if p.Keeps() {
		return
	}
	msg := "the fleet's Redis keeps nothing across its own restart (appendonly no, no save points): " +
		"a restart of Redis loses the homes and apps registered through the admin API, roll targets set through it, " +
		"operator leases and session counts; homes and apps of the config are recorded again by the gateways by themselves. " +
		"Run Redis with appendonly yes (or save points) to keep them"
	f.log.Error("fleet: NO PERSISTENCE: " + msg)
	f.notes.persistence.Store(&msg)
}

// checkEpoch reads the store's epoch and heals the store when it changed.
// It runs on Run's goroutine.
func (f *Fleet[H]) checkEpoch(ctx context.Context) {
	ep, err := f.store.Epoch(ctx)
	if err != nil {
		return // the pass's own reads say it
	}
	if f.epoch == "" || f.epoch == ep {
		f.epoch = ep
		return
	}
	f.epoch = ep
	t0 := time.Now()
	f.log.Error("fleet: the store lost its data (its epoch changed: Redis restarted without persistence, or was flushed); " +
		"recording again the homes this gateway runs and its config's homes, targets and roll target")
	f.engine.Heartbeat(ctx, f.o.IdleTick)
	f.announceVersion(ctx)
	f.reportLost(ctx)
	f.healHomes(ctx, f.reg.ConfigHomeIDs())
	if rt := f.o.RollTarget; rt.Version != "" {
		if _, err := f.engine.SetTarget(ctx, rt); err != nil {
			f.log.Warn("fleet: record the config's roll target again", "err", err)
		}
	}
	f.log.Info("fleet: the store is healed from this gateway's homes", "ms", time.Since(t0).Milliseconds())
}

// healHomes records again the homes ids (of the config) whose records are
// missing: those whose processes this gateway runs at once, with their
// targets' claims, the others as sleeping homes after healOwnersFirst.
func (f *Fleet[H]) healHomes(ctx context.Context, ids []string) {
	var rest []string
	for _, id := range ids {
		h, ok := f.reg.d.Homes.WithID(id)
		if !ok {
			continue
		}
		if _, err := f.reg.ClaimConfigTarget(ctx, id, h.Spec().Target); err != nil {
			f.log.Warn("fleet: claim a config home's target again", "home", id, "err", err)
		}
		runs, err := f.engine.RecordRun(ctx, id)
		switch {
		case err != nil:
			f.log.Warn("fleet: record a home this gateway runs", "home", id, "err", err)
		case runs:
			f.log.Info("fleet: home recorded again as run by this gateway", "home", id)
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
		ok, err := f.engine.Reseed(ctx, id)
		if err != nil {
			f.log.Warn("fleet: record a config home again", "home", id, "err", err)
		}
		if ok {
			created++
		}
	}
	if created > 0 {
		f.log.Info("fleet: config homes recorded again as sleeping", "homes", created)
	}
}

// reportLost names the homes and apps registered through the admin API
// that this gateway serves and whose records are gone: no config can
// bring them back.
func (f *Fleet[H]) reportLost(ctx context.Context) {
	recs, err := f.store.ListHomes(ctx)
	if err != nil {
		return
	}
	stored := make(map[string]bool, len(recs))
	for _, rec := range recs {
		stored[rec.ID] = true
	}
	config := map[string]bool{}
	for _, id := range f.reg.ConfigHomeIDs() {
		config[id] = true
	}
	var homes []string
	f.reg.d.Homes.Each(func(h H) bool {
		if id := h.Spec().ID; !config[id] && !stored[id] {
			homes = append(homes, id)
		}
		return true
	})
	var apps []string
	f.reg.d.Apps.Lock()
	defer f.reg.d.Apps.Unlock()
	if stored, err := f.store.ListApps(ctx); err == nil {
		have := make(map[string]bool, len(stored))
		for _, a := range stored {
			have[a.Slug] = true
		}
		for slug, gen := range f.reg.d.Apps.Generations() {
			if gen != 0 && !f.reg.IsConfigApp(slug) && !have[slug] {
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
	f.log.Error("fleet: "+msg, "homes", homes, "apps", apps)
	f.notes.lost.Store(&msg)
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

// Kick asks Run for a pass now: a wake found a record missing (the
// engine calls it on a registered home whose record is gone).
func (f *Fleet[H]) Kick(string) {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}
