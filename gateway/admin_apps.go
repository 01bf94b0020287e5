package gateway

import (
	"context"
	"errors"
	"github.com/wakegate/wakegate/route"
	"sort"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// The app side of adminAPI: views of apps, their registration through the
// registrar (control/apps.go), observations and operations.

// app returns the app routed at slug, or a fault.NotFound naming it.
func (a adminAPI) app(slug string) (*route.App, error) {
	ar, ok := a.g.appBySlug(slug)
	if !ok {
		return nil, control.AppNotFound(slug)
	}
	return ar, nil
}

// appView is ar as the admin API shows it, with its status st.
func (a adminAPI) appView(ar *route.App, st wake.AppStatus) admin.AppView {
	v := admin.AppView{Slug: ar.Config().Slug, Kind: ar.Config().Kind, Home: ar.Config().Home, Upstream: safeURL(ar.Config().Upstream),
		URL: a.g.appURL(ar.Config().Slug), Phase: string(st.Phase), Reason: st.Reason, Message: st.Message, Route: string(st.Route),
		ProbeStatus: st.ProbeStatus, Operation: st.Operation, Stale: st.Stale, Hint: st.Hint, Source: "config"}
	if ar.Generation() != 0 {
		v.Source, v.Generation = "api", ar.Generation()
	}
	if !st.ObservedAt.IsZero() {
		t := st.ObservedAt
		v.ObservedAt = &t
	}
	if v.Phase == "" {
		v.Phase = string(wake.PhaseUnknown)
	}
	return v
}

// current is the view of the app at slug with its last stored status.
func (a adminAPI) current(slug string) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	st, _ := a.g.Apps().Status(slug)
	return a.appView(ar, st), nil
}

// ListApps returns every routed app, by slug.
func (a adminAPI) ListApps() []admin.AppView {
	routes := a.g.routeTab.all()
	out := make([]admin.AppView, 0, len(routes))
	for _, r := range routes {
		st, _ := a.g.Apps().Status(r.Config().Slug)
		out = append(out, a.appView(r, st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// GetApp returns the app at slug with its phase history.
func (a adminAPI) GetApp(slug string) (admin.AppView, error) {
	v, err := a.current(slug)
	if err == nil {
		v.Phases = a.g.Apps().PhaseHistory(slug)
		if s, ok := a.g.Apps().Schedule(slug); ok {
			v.Checks = admin.ChecksOf(s)
		}
	}
	return v, err
}

// PutApp checks body as an app for slug and registers it.
func (a adminAPI) PutApp(ctx context.Context, slug string, body admin.Body, ifMatch uint64) (admin.AppView, bool, error) {
	var req registry.App
	if err := body.Decode(&req); err != nil {
		return admin.AppView{}, false, err
	}
	ac, err := a.g.reg.AppFromRequest(slug, req)
	if err != nil {
		return admin.AppView{}, false, err
	}
	_, created, err := a.g.reg.PutAPIApp(ctx, ac, ifMatch)
	if err != nil {
		return admin.AppView{}, false, err
	}
	v, err := a.current(slug)
	return v, created, err
}

// DeleteApp removes an app registered through the admin API.
func (a adminAPI) DeleteApp(ctx context.Context, slug string, ifMatch uint64) error {
	return a.g.reg.RemoveAPIApp(ctx, slug, ifMatch)
}

// RefreshApp observes the app now and, with wait, until it is in that
// phase.
func (a adminAPI) RefreshApp(ctx context.Context, slug string, wait wake.Phase) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	st, err := a.g.Apps().Refresh(ctx, slug, wait)
	return a.appResult(ar, st, err)
}

// StartApp starts the app (waking its home) and waits until it is ready.
func (a adminAPI) StartApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.g.Apps().Start)
}

// StopApp stops the app (suspending its home) and waits until it is
// stopped.
func (a adminAPI) StopApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.g.Apps().Stop)
}

// RestartApp stops the app and starts it again.
func (a adminAPI) RestartApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.g.Apps().Restart)
}

// operate runs one of wake.Apps' operations on the app at slug.
func (a adminAPI) operate(ctx context.Context, slug string, budget time.Duration,
	op func(context.Context, string, time.Duration) (wake.AppStatus, error)) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	a.g.log.Info("app operation", "app", slug, "budget", budget.String())
	st, err := op(ctx, slug, budget)
	return a.appResult(ar, st, err)
}

// appResult is the answer after an observation or an operation that
// returned st and err: the app's view and no error once the app was
// observed (a failed app says so in its view; a finished operation is no
// longer shown), with a timeout error when the wait ran out (the view
// shows the operation phase the app was in), and the error alone when the
// app was not observed.
func (a adminAPI) appResult(ar *route.App, st wake.AppStatus, err error) (admin.AppView, error) {
	if err == nil {
		if cur, ok := a.g.Apps().Status(ar.Config().Slug); ok {
			st = cur
		}
		return a.appView(ar, st), nil
	}
	if st.Slug == "" {
		return admin.AppView{}, err
	}
	v := a.appView(ar, st)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return v, err
	case st.Phase == wake.PhaseFailed:
		return v, nil
	}
	return v, err
}

// ListRoutes returns the route table.
func (a adminAPI) ListRoutes() []admin.RouteView {
	routes := a.g.Routes()
	out := make([]admin.RouteView, len(routes))
	for i, r := range routes {
		out[i] = admin.RouteView{Slug: r.Slug, State: r.State}
	}
	return out
}
