package route

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/registry"
)

// This file is the request side of apps: forwarding a self-probe, the wait
// of a request for an app whose route is not published, the 503 answer of
// such an app. (The waiting page and its status are in waitpage.go.) The
// route table, its publication and the self-probe client are the control
// plane's (control/apptable.go, control/selfprobe.go).
//
// An app inside a home that sleeps is presented as starting/home-sleeping,
// and its route is unpublished once failure_threshold observations saw it
// asleep (observations never wake a home). A request to it wakes the home
// like /node does, then waits for a self-probe of the woken home: it is
// answered once that passed, within wake_timeout, and a browser gets the
// waiting page after hold. Self-probes count no session, so they never keep
// a home from going idle.

// serveSelfProbe forwards a self-probe: to a candidate as well as to a
// published route, never waking a home and counting no session.
func (p *Path) serveSelfProbe(w http.ResponseWriter, r *http.Request, app *App, route *forward.Route) {
	if app.home == nil {
		route.Upstream = app.upstream
		p.proxy.Serve(w, r, route)
		return
	}
	home := p.current(app.home)
	hs, err := p.engine.HomeState(r.Context(), home.spec.ID)
	if err != nil || hs.Endpoint == "" || (!hs.Warm && hs.Status != registry.StatusRunning) {
		p.writeError(w, r, fault.New(fault.NotReady, "home_sleeping", "The home is not running; a self-probe does not wake it."))
		return
	}
	u, err := url.Parse(endpoint.HTTP(hs.Endpoint))
	if err != nil {
		p.writeError(w, r, fmt.Errorf("home endpoint %q: %w", hs.Endpoint, err))
		return
	}
	route.Upstream = joinPath(u, app.cfg.Path)
	route.RelayToken = home.Token()
	p.proxy.Serve(w, r, route)
}

// appUpstream is where a request for route goes on a home at endpoint: the
// endpoint, joined with the app's base path for an app.
func (p *Path) appUpstream(route *forward.Route, endpoint *url.URL) *url.URL {
	if route.Kind == "app" {
		if ar, ok := p.app(route.Name); ok {
			return joinPath(endpoint, ar.cfg.Path)
		}
	}
	return endpoint
}

// joinPath returns u with base appended to its path.
func joinPath(u *url.URL, base string) *url.URL {
	if base == "" {
		return u
	}
	out := *u
	out.Path = strings.TrimSuffix(u.Path, "/") + base
	out.RawPath = ""
	return &out
}

// awaitApp handles a user request for an app whose route is not published:
// it wakes the app's home if it sleeps (like /node), then waits for an
// observation of the app (the self-probe publishes the route). It reports
// true when the route is published and the request may be forwarded, and
// otherwise has answered: 503 with the phase and reason, or the waiting
// page for a browser while the home wakes.
func (p *Path) awaitApp(w http.ResponseWriter, r *http.Request, app *App, route *forward.Route) bool {
	slug := app.cfg.Slug
	if p.observer.Stopped(slug) {
		st, _ := p.observer.Status(slug)
		p.writeAppNotReady(w, r, st)
		return false
	}
	nav := isNavigation(r)
	waitFrom := time.Now() // when a navigation began to wait, for the waiting page's clock
	budget := p.conf().WakeTimeout
	if nav {
		budget = p.conf().Hold
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget)
	defer cancel()
	since := time.Now().Add(-app.cfg.MinRefresh.Duration())
	switch st, _ := p.observer.Status(slug); st.Reason {
	case appstatus.ReasonHomeSleeping, appstatus.ReasonHomeWaking, appstatus.ReasonRuntimeFailed:
		// The stored observation saw the home down or failed; it may run
		// since (a /node request, a wake that finished, a home fixed and
		// woken again): observe again.
		since = time.Now()
	}
	if h := app.home; h != nil && !p.engine.Warm(p.current(h).spec.ID) {
		id := p.current(h).spec.ID
		if p.noWake(r, strings.TrimPrefix(r.URL.Path, app.prefix)) && p.engine.Sleeping(id) {
			p.writeError(w, r, homefault.Asleep(p.conf().RetryAfter))
			return false
		}
		c := p.sessions.Begin(id)
		defer p.sessions.End(c)
		hs, err := p.engine.HomeState(ctx, id)
		running := err == nil && hs.Status == registry.StatusRunning && !hs.Waking
		if _, err := p.engine.EnsureAwake(ctx, id); err != nil {
			if fe, ok := fault.As(err); nav && ok && fe.Code == homefault.CodeHomeWaking && r.Context().Err() == nil {
				p.serveWaitingPage(w, r, route, waitFrom)
				return false
			}
			p.writeError(w, r, err)
			return false
		}
		if !running {
			// The home was woken for this request: only an observation of
			// the woken home can publish its route.
			since = time.Now()
		}
	}
	st, _ := p.observer.RefreshSince(ctx, slug, since)
	if p.published(app) {
		return true
	}
	if nav && app.home != nil && ctx.Err() != nil && r.Context().Err() == nil && st.Phase == appstatus.PhaseStarting {
		p.serveWaitingPage(w, r, route, waitFrom)
		return false
	}
	p.writeAppNotReady(w, r, st)
	return false
}

// writeAppNotReady answers 503 for an app whose route is not published:
// JSON for API callers, a page for browsers (appNotReady).
func (p *Path) writeAppNotReady(w http.ResponseWriter, r *http.Request, st appstatus.Status) {
	p.writeError(w, r, appNotReady(st, p.conf().RetryAfter))
}

// appNotReady is the error of a request for an app in status st: the code
// app_{phase}, a sentence for people by phase, and the phase and reason
// code in X-Wakegate-App-Phase and X-Wakegate-App-Reason. The
// observation's own message, which may name an upstream's address or a
// path, is the cause: it goes to the log with the request id, never to the
// caller (DESIGN rule 23).
func appNotReady(st appstatus.Status, retry time.Duration) error {
	kind, msg := fault.NotReady, "The app is starting; try again shortly."
	switch {
	case st.Reason == appstatus.ReasonProbeFailed && st.ProbeStatus != 0:
		// The status seen is the app's own answer, no internal detail.
		msg = fmt.Sprintf("The app is starting; its last check through the gateway got %d %s.",
			st.ProbeStatus, http.StatusText(st.ProbeStatus))
	case st.Phase == appstatus.PhaseStopped:
		msg = "The app is stopped."
	case st.Phase == appstatus.PhaseFailed:
		kind, msg = fault.Failed, "The app is not working at the moment."
	case st.Phase == appstatus.PhaseUnknown:
		msg = "The app has not been checked yet; try again shortly."
	}
	e := fault.Wrap(kind, "app_"+string(st.Phase), msg, fmt.Errorf("app %s is %s (%s): %s", st.Slug, st.Phase, st.Reason, st.Message)).
		WithRetry(retry)
	e.Header = http.Header{"X-Wakegate-App-Phase": {string(st.Phase)}, "X-Wakegate-App-Reason": {st.Reason}}
	return e
}
