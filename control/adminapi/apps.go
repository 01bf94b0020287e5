package adminapi

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
)

// The app side of the admin API: views of apps, their registration through
// the registrar (control/apps.go), observations and operations.

// app returns the app routed at slug, or a fault.NotFound naming it.
func (a *Backend[H]) app(slug string) (control.ServedApp, error) {
	ar, ok := a.d.AppRoutes.Served(slug)
	if !ok {
		return control.ServedApp{}, control.AppNotFound(slug)
	}
	return ar, nil
}

// appView is ar as the admin API shows it, with its status st.
func (a *Backend[H]) appView(ar control.ServedApp, st appstatus.Status) admin.AppView {
	v := admin.AppView{Slug: ar.App.Slug, Kind: ar.App.Kind, Home: ar.App.Home, Upstream: safeURL(ar.App.Upstream),
		URL: a.d.AppRoutes.URL(ar.App.Slug), Phase: string(st.Phase), Reason: st.Reason, Message: st.Message, Route: string(st.Route),
		ProbeStatus: st.ProbeStatus, Operation: st.Operation, Stale: st.Stale, Hint: st.Hint, Source: "config"}
	if ar.Generation != 0 {
		v.Source, v.Generation = "api", ar.Generation
	}
	if !st.ObservedAt.IsZero() {
		t := st.ObservedAt
		v.ObservedAt = &t
	}
	if v.Phase == "" {
		v.Phase = string(appstatus.PhaseUnknown)
	}
	return v
}

// current is the view of the app at slug with its last stored status.
func (a *Backend[H]) current(slug string) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	st, _ := a.d.AppObserver.Status(slug)
	return a.appView(ar, st), nil
}

// ListApps returns every routed app, by slug.
func (a *Backend[H]) ListApps() []admin.AppView {
	routes := a.d.AppRoutes.AllServed()
	out := make([]admin.AppView, 0, len(routes))
	for _, r := range routes {
		st, _ := a.d.AppObserver.Status(r.App.Slug)
		out = append(out, a.appView(r, st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// GetApp returns the app at slug with its phase history.
func (a *Backend[H]) GetApp(slug string) (admin.AppView, error) {
	v, err := a.current(slug)
	if err == nil {
		v.Phases = a.d.AppObserver.PhaseHistory(slug)
		if s, ok := a.d.AppObserver.Schedule(slug); ok {
			v.Checks = admin.ChecksOf(s)
		}
	}
	return v, err
}

// PutApp checks body as an app for slug and registers it.
func (a *Backend[H]) PutApp(ctx context.Context, slug string, body admin.Body, ifMatch uint64) (admin.AppView, bool, error) {
	var req registry.App
	if err := body.Decode(&req); err != nil {
		return admin.AppView{}, false, err
	}
	ac, err := a.d.Registrar.AppFromRequest(slug, req)
	if err != nil {
		return admin.AppView{}, false, err
	}
	_, created, err := a.d.Registrar.PutAPIApp(ctx, ac, ifMatch)
	if err != nil {
		return admin.AppView{}, false, err
	}
	v, err := a.current(slug)
	return v, created, err
}

// DeleteApp removes an app registered through the admin API.
func (a *Backend[H]) DeleteApp(ctx context.Context, slug string, ifMatch uint64) error {
	return a.d.Registrar.RemoveAPIApp(ctx, slug, ifMatch)
}

// RefreshApp observes the app now and, with wait, until it is in that
// phase.
func (a *Backend[H]) RefreshApp(ctx context.Context, slug string, wait appstatus.Phase) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	st, err := a.d.AppObserver.Refresh(ctx, slug, wait)
	return a.appResult(ar, st, err)
}

// StartApp starts the app (waking its home) and waits until it is ready.
func (a *Backend[H]) StartApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.d.AppObserver.Start)
}

// StopApp stops the app (suspending its home) and waits until it is
// stopped.
func (a *Backend[H]) StopApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.d.AppObserver.Stop)
}

// RestartApp stops the app and starts it again.
func (a *Backend[H]) RestartApp(ctx context.Context, slug string, budget time.Duration) (admin.AppView, error) {
	return a.operate(ctx, slug, budget, a.d.AppObserver.Restart)
}

// operate runs one of appstatus.Apps' operations on the app at slug.
func (a *Backend[H]) operate(ctx context.Context, slug string, budget time.Duration,
	op func(context.Context, string, time.Duration) (appstatus.Status, error)) (admin.AppView, error) {
	ar, err := a.app(slug)
	if err != nil {
		return admin.AppView{}, err
	}
	a.d.Log.Info("app operation", "app", slug, "budget", budget.String())
	st, err := op(ctx, slug, budget)
	return a.appResult(ar, st, err)
}

// appResult is the answer after an observation or an operation that
// returned st and err: the app's view and no error once the app was
// observed (a failed app says so in its view; a finished operation is no
// longer shown), with a timeout error when the wait ran out (the view
// shows the operation phase the app was in), and the error alone when the
// app was not observed.
func (a *Backend[H]) appResult(ar control.ServedApp, st appstatus.Status, err error) (admin.AppView, error) {
	if err == nil {
		if cur, ok := a.d.AppObserver.Status(ar.App.Slug); ok {
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
	case st.Phase == appstatus.PhaseFailed:
		return v, nil
	}
	return v, err
}

// ListRoutes returns the route table.
func (a *Backend[H]) ListRoutes() []admin.RouteView {
	sts := a.d.AppObserver.List()
	out := make([]admin.RouteView, len(sts))
	for i, st := range sts {
		state := appstatus.RouteCandidate
		if a.d.AppRoutes.Published(st.Slug) {
			state = appstatus.RoutePublished
		}
		out[i] = admin.RouteView{Slug: st.Slug, State: state}
	}
	return out
}
