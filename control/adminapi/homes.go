package adminapi

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// The home side of the admin API: views of homes and the actions on them.
// Registration itself is the registrar's (control/registrar.go).

// home returns the home with id, or a fault.NotFound naming it.
func (a *Backend[H]) home(id string) (H, error) {
	h, ok := a.d.Homes.WithID(id)
	if !ok {
		var none H
		return none, fault.New(fault.NotFound, "home_not_found", "no home with id "+strconv.Quote(id)).WithField("id")
	}
	return h, nil
}

// view is h as the admin API shows it, from its stored record rec.
func (a *Backend[H]) view(h H, rec registry.Home) admin.HomeView {
	s := h.Spec()
	v := admin.HomeView{ID: s.ID, Target: s.Target, Provider: rec.Provider, Version: rec.Version,
		Status: string(rec.Status), Verdict: string(rec.Verdict), Reason: rec.Reason, WantRunning: rec.WantRunning,
		Endpoint: safeURL(rec.Endpoint), Runner: rec.Runner, Sessions: a.d.Sessions.Count(s.ID), Warm: a.d.Engine.Warm(s.ID),
		IdleTimeout: s.IdleTimeout.String(), RelayToken: s.RelayToken != "",
		Generation: rec.Generation, Dynamic: rec.Dynamic}
	settingsView(s, &v)
	if v.Verdict == "" {
		v.Verdict = "none"
	}
	if phase, el, ok := a.d.Engine.Progress(s.ID); ok {
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
	v.LastWake = a.d.Engine.LastWake(s.ID)
	if ls := a.d.Engine.LastStop(s.ID); ls != nil {
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
func (a *Backend[H]) ListHomes(ctx context.Context) ([]admin.HomeView, error) {
	recs, err := a.d.Store.ListHomes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list homes: %w", err)
	}
	byID := map[string]registry.Home{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]admin.HomeView, 0, a.d.Homes.Count())
	a.d.Homes.Each(func(h H) bool {
		s := h.Spec()
		rec, ok := byID[s.ID]
		if !ok {
			rec = registry.Home{ID: s.ID, Provider: s.Provider, Version: s.Version, Status: registry.StatusUnknown}
		}
		out = append(out, a.view(h, rec))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// detail is h's view with its stored record read now and its restarts.
func (a *Backend[H]) detail(ctx context.Context, h H) (admin.HomeView, error) {
	s := h.Spec()
	rec, err := a.d.Store.GetHome(ctx, s.ID)
	if err != nil {
		return admin.HomeView{}, fmt.Errorf("read home %s: %w", s.ID, err)
	}
	v := a.view(h, rec)
	a.enrich(ctx, h, rec, &v)
	if hi, ok := a.d.Providers[s.Provider].(provider.Historian); ok {
		v.Restarts = hi.History(s.ID)
	}
	if ur, ok := a.d.Providers[s.Provider].(provider.UsageReporter); ok {
		if u, ok := ur.Usage(s.ID); ok {
			v.Usage = &u
		}
	}
	return v, nil
}

// GetHome returns home id.
func (a *Backend[H]) GetHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// PutHome registers or replaces a home through the registrar.
func (a *Backend[H]) PutHome(ctx context.Context, id string, req admin.HomeRequest, ifMatch uint64) (admin.HomeView, bool, error) {
	d, spec, err := a.homeDecl(id, req)
	if err != nil {
		return admin.HomeView{}, false, err
	}
	h, created, err := a.d.Registrar.PutAPIHome(ctx, d, spec, ifMatch)
	if err != nil {
		return admin.HomeView{}, false, err
	}
	v, err := a.detail(ctx, h)
	return v, created, err
}

// homeDecl converts an admin request for home id into the control plane's
// declaration: the config's defaults fill what the request leaves out, and
// the config's rules (config.HomeDecl.Check) check it, naming every bad
// field. spec is the declaration as the engine registers it, its relay
// token resolved.
func (a *Backend[H]) homeDecl(id string, req admin.HomeRequest) (config.HomeDecl, homes.Spec, error) {
	var bad fault.FieldErrors
	w := a.d.Registrar.WakeDefaults()
	d := config.HomeDecl{ID: id, Target: cmp.Or(req.Target, id), Provider: cmp.Or(req.Provider, "exec"),
		Version: cmp.Or(req.Version, "1"), RelayToken: req.RelayToken, Probe: req.Probe, IdleTimeout: w.IdleTimeout,
		Settings: provider.Settings{Command: req.Command, Env: req.Env, Dir: req.WorkingDir, Options: req.Options}}
	d.Probe.Kind = cmp.Or(d.Probe.Kind, w.Probe.Kind)
	if len(d.Version) > provider.MaxVersionLen {
		bad.Add("version", "at most %d characters", provider.MaxVersionLen)
	}
	for _, t := range []struct {
		field string
		in    *string
		out   *time.Duration
	}{{"idle_timeout", req.IdleTimeout, &d.IdleTimeout}, {"ready_timeout", req.ReadyTimeout, &d.ReadyTimeout}} {
		if t.in == nil {
			continue
		}
		v, err := time.ParseDuration(*t.in)
		if err != nil {
			bad.Add(t.field, "want a duration such as 5m, got %q", *t.in)
			continue
		}
		*t.out = v
	}
	for _, p := range a.d.Registrar.CheckHome(d) {
		if p.Field == "target" && req.Target == "" {
			if !config.ValidHomeID(id) {
				continue // the id's own problem says it
			}
			p = provider.Problemf("id", "%q is also the home's target (/node/%s) since no target is set, and a target "+
				"is 1-63 of [a-z0-9-] starting with a letter or digit: set target (for example %q) or change the id",
				id, id, config.TargetFromID(id))
		}
		bad.Add(p.Field, "%s", p.Msg)
	}
	spec := control.DeclSpec(d, "")
	if err := control.ResolveToken(&spec, req.RelayToken); err != nil {
		bad.Add("relay_token", "%v", err)
	}
	return d, spec, bad.Invalid()
}

// DeleteHome removes a home through the registrar.
func (a *Backend[H]) DeleteHome(ctx context.Context, id string, ifMatch uint64) error {
	h, err := a.home(id)
	if err != nil {
		return err
	}
	return a.d.Registrar.RemoveHome(ctx, h, ifMatch)
}

// WakeHome wakes a home: with wait, until it is ready (bounded by ctx).
func (a *Backend[H]) WakeHome(ctx context.Context, id string, wait bool) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if wait {
		_, err = a.d.Engine.WakeNow(ctx, id, "admin")
	} else {
		err = a.d.Engine.StartNow(id, "admin")
	}
	if err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// SuspendHome suspends a home.
func (a *Backend[H]) SuspendHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if err := a.d.Engine.Suspend(ctx, id); err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// RollHome rolls a home onto the target now.
func (a *Backend[H]) RollHome(ctx context.Context, id string) (admin.HomeView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.HomeView{}, err
	}
	if _, err := a.d.Engine.Roll(ctx, id); err != nil {
		return admin.HomeView{}, err
	}
	return a.detail(ctx, h)
}

// AddLease holds a session on a home for ttl.
func (a *Backend[H]) AddLease(id string, ttl time.Duration) (uint64, error) {
	if _, err := a.home(id); err != nil {
		return 0, err
	}
	return a.d.Leases.AddLease(id, ttl)
}

// EndLease ends a live lease.
func (a *Backend[H]) EndLease(id string, lease uint64) error {
	if _, err := a.home(id); err != nil {
		return err
	}
	live, err := a.d.Leases.EndLease(id, lease)
	if err != nil {
		return err
	}
	if !live {
		return fault.New(fault.NotFound, "lease_not_found", "no live lease with this id on the home").WithField("lease")
	}
	return nil
}

// GetTarget returns the stored roll target.
func (a *Backend[H]) GetTarget(ctx context.Context) (registry.Target, error) {
	t, err := a.d.Engine.Target(ctx)
	if fault.Is(err, fault.NotFound) {
		return t, fault.New(fault.NotFound, "no_target", "no roll target is registered").
			WithHint("register one with PUT /admin/target or roll.target in the config")
	}
	return t, err
}

// SetTarget registers the roll target. ifMatch, when not 0, must be the
// stored target's generation; the engine then writes with its own
// compare-and-set.
func (a *Backend[H]) SetTarget(ctx context.Context, t registry.Target, ifMatch uint64) (registry.Target, error) {
	if ifMatch != 0 {
		cur, err := a.d.Engine.Target(ctx)
		if err != nil && !fault.Is(err, fault.NotFound) {
			return registry.Target{}, err
		}
		if cur.Generation != ifMatch {
			return registry.Target{}, fault.StaleIfMatch("target", ifMatch, cur.Generation)
		}
	}
	t, err := a.d.Engine.SetTarget(ctx, t)
	return t, err
}

// settingsView shows s's own settings in v: its probe, ready timeout,
// command, working dir, options, and the names (never the values) of its
// environment entries.
func settingsView(s homes.Spec, v *admin.HomeView) {
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
