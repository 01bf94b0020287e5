package gateway

import (
	"context"
	"fmt"
	"github.com/wakegate/wakegate/route"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// The home side of adminAPI: views of homes and the actions on them.
// Registration itself is the registrar's (control/registrar.go).

// home returns the home with id, or a fault.NotFound naming it.
func (a adminAPI) home(id string) (*route.Home, error) {
	h, ok := a.g.homeWithID(id)
	if !ok {
		return nil, fault.New(fault.NotFound, "home_not_found", "no home with id "+strconv.Quote(id)).WithField("id")
	}
	return h, nil
}

// view is h as the admin API shows it, from its stored record rec.
func (a adminAPI) view(h *route.Home, rec registry.Home) admin.HomeView {
	g := a.g
	v := admin.HomeView{ID: h.Spec().ID, Target: h.Spec().Target, Provider: rec.Provider, Version: rec.Version,
		Status: string(rec.Status), Verdict: string(rec.Verdict), Reason: rec.Reason, WantRunning: rec.WantRunning,
		Endpoint: safeURL(rec.Endpoint), Runner: rec.Runner, Sessions: g.sessions.Count(h.Spec().ID), Warm: g.engine.Warm(h.Spec().ID),
		IdleTimeout: h.Spec().IdleTimeout.String(), RelayToken: h.Token() != "",
		Generation: rec.Generation, Dynamic: rec.Dynamic}
	settingsView(h.Spec(), &v)
	if v.Verdict == "" {
		v.Verdict = "none"
	}
	if phase, el, ok := g.engine.Progress(h.Spec().ID); ok {
		v.Wake = &admin.WakeProgress{Phase: phase, ElapsedMS: el.Milliseconds()}
	}
	if !rec.LastWakeAt.IsZero() {
		t := rec.LastWakeAt
		v.LastWakeAt = &t
		v.LastWakeLatencyMS = float64(rec.LastWakeLatency.Microseconds()) / 1000
	}
	if !rec.LastReadyAt.IsZero() {
		t := rec.LastReadyAt
		v.LastReadyAt = &t
	}
	v.SuspendInS = a.suspendIn(h, rec)
	v.LastWake = g.engine.LastWake(h.Spec().ID)
	if ls := g.engine.LastStop(h.Spec().ID); ls != nil {
		v.LastStop = &admin.StopView{At: ls.At, Proven: ls.Proven, Error: ls.Error}
	}
	return v
}

// safeURL drops user info, query and fragment from an endpoint.
func safeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// ListHomes returns every routed home, by id.
func (a adminAPI) ListHomes(ctx context.Context) ([]admin.HomeView, error) {
	recs, err := a.g.store.ListHomes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list homes: %w", err)
	}
	byID := map[string]registry.Home{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]admin.HomeView, 0, a.g.homeCount())
	a.g.eachHome(func(h *route.Home) bool {
		id := h.Spec().ID
		rec, ok := byID[id]
		if !ok {
			rec = registry.Home{ID: id, Provider: h.Spec().Provider, Version: h.Spec().Version, Status: registry.StatusUnknown}
		}
		out = append(out, a.view(h, rec))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// detail is h's view with its stored record read now and its restarts.
func (a adminAPI) detail(ctx context.Context, h *route.Home) (admin.HomeView, error) {
	rec, err := a.g.store.GetHome(ctx, h.Spec().ID)
	if err != nil {
		return admin.HomeView{}, fmt.Errorf("read home %s: %w", h.Spec().ID, err)
	}
	v := a.view(h, rec)
	a.enrich(ctx, h, rec, &v)
	if hi, ok := a.g.providers[h.Spec().Provider].(provider.Historian); ok {
		v.Restarts = hi.History(h.Spec().ID)
	}
	if ur, ok := a.g.providers[h.Spec().Provider].(provider.UsageReporter); ok {
		if u, ok := ur.Usage(h.Spec().ID); ok {
			v.Usage = &u
		}
	}
	return v, nil
}

// GetHome returns home id.
func (a adminAPI) GetHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// PutHome registers or replaces a home through the registrar.
func (a adminAPI) PutHome(ctx context.Context, id string, req admin.HomeRequest, ifMatch uint64) (admin.HomeView, bool, error) {
	h, created, err := a.g.reg.PutAPIHome(ctx, id, req, ifMatch)
	if err != nil {
		return admin.HomeView{}, false, err
	}
	v, err := a.detail(ctx, h)
	return v, created, err
}

// DeleteHome removes a home through the registrar.
func (a adminAPI) DeleteHome(ctx context.Context, id string, ifMatch uint64) error {
	h, err := a.home(id)
	if err != nil {
		return err
	}
	return a.g.reg.RemoveHome(ctx, h, ifMatch)
}

// WakeHome wakes a home: with wait, until it is ready (bounded by ctx).
func (a adminAPI) WakeHome(ctx context.Context, id string, wait bool) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if wait {
		_, err = a.g.engine.WakeNow(ctx, id, "admin")
	} else {
		err = a.g.engine.StartNow(id, "admin")
	}
	if err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// SuspendHome suspends a home.
func (a adminAPI) SuspendHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if err := a.g.engine.Suspend(ctx, id); err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// RollHome rolls a home onto the target now.
func (a adminAPI) RollHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if _, err := a.g.engine.Roll(ctx, id); err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// AddLease holds a session on a home for ttl.
func (a adminAPI) AddLease(id string, ttl time.Duration) (uint64, error) {
	if _, err := a.home(id); err != nil {
		return 0, err
	}
	if lease, ok, err := a.g.addFleetLease(id, ttl); ok { // fleet_leases.go
		return lease, err
	}
	return a.g.sessions.Lease(id, ttl), nil
}

// EndLease ends a live lease.
func (a adminAPI) EndLease(id string, lease uint64) error {
	if _, err := a.home(id); err != nil {
		return err
	}
	live, ok, err := a.g.endFleetLease(id, lease) // fleet_leases.go
	if err != nil {
		return err
	}
	if !ok {
		live = a.g.sessions.EndLease(id, lease)
	}
	if !live {
		return fault.New(fault.NotFound, "lease_not_found", "no live lease with this id on the home").WithField("lease")
	}
	return nil
}

// GetTarget returns the stored roll target.
func (a adminAPI) GetTarget(ctx context.Context) (registry.Target, error) {
	t, err := a.g.engine.Target(ctx)
	if fault.Is(err, fault.NotFound) {
		return t, fault.New(fault.NotFound, "no_target", "no roll target is registered").
			WithHint("register one with PUT /admin/target or roll.target in the config")
	}
	return t, err
}

// SetTarget registers the roll target. ifMatch, when not 0, must be the
// stored target's generation; the engine then writes with its own
// compare-and-set.
func (a adminAPI) SetTarget(ctx context.Context, t registry.Target, ifMatch uint64) (registry.Target, error) {
	if ifMatch != 0 {
		cur, err := a.g.engine.Target(ctx)
		if err != nil && !fault.Is(err, fault.NotFound) {
			return registry.Target{}, err
		}
		if cur.Generation != ifMatch {
			return registry.Target{}, admin.StaleIfMatch("target", ifMatch, cur.Generation)
		}
	}
	t, err := a.g.engine.SetTarget(ctx, t)
	return t, err
}

// settingsView shows s's own settings in v: its probe, ready timeout,
// command, working dir, options, and the names (never the values) of its
// environment entries.
func settingsView(s wake.HomeSpec, v *admin.HomeView) {
	v.Probe = registry.HomeProbe{Kind: string(s.Probe), Path: s.ProbePath, Statuses: s.ProbeStatuses,
		Settle: registry.Duration(s.ProbeSettle)}
	if s.ReadyTimeout > 0 {
		v.ReadyTimeout = s.ReadyTimeout.String()
	}
	st := s.Settings
	v.Command, v.WorkingDir, v.Options = st.Command, st.Dir, st.Options
	for _, kv := range st.Env {
		k, _, _ := strings.Cut(kv, "=")
		v.EnvKeys = append(v.EnvKeys, k)
	}
}
