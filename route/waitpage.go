package route

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/wakerecord"
	"github.com/wakegate/wakegate/web"
)

// The waiting page (DESIGN rule 7) and its public status. A browser that
// would wait past wake.hold for a home gets the page; the page watches
// GET /_wakegate/wake/{node|app}/{name}, which admits callers exactly as
// the home or app itself does, and answers in three ways:
//
//   - text/event-stream: a stream of "phase" events, one per change of
//     phase (queued, starting, health-pending, probing, then ready, failed
//     or asleep), that ends with the first of the last three;
//   - text/html: the refresh target of a page without JavaScript: the
//     page again while the home wakes, the failure when it failed, and a
//     303 back to the page's own URL (the to parameter) once it is ready;
//   - anything else: one JSON report.
//
// A report carries the phase, the time the wake has run and, for a
// failure, the public code, sentence and request id: nothing of the
// home's endpoint, process or command. Watching starts no wake, so a page
// left open on a home that failed never wakes it again; its retry button
// (the page's own URL) does, as any request would.

// waitSubject is the home or the app a waiting page waits for.
type waitSubject struct {
	kind string // "node" or "app"
	name string // the target or the slug
	// home is the home that wakes: the node's, or the app's (nil for an app
	// outside any home).
	home *Home
	app  *App // nil for a node
}

// waitSubjectOf returns the home (kind "node") or app named name.
func (p *Path) waitSubjectOf(kind, name string) (waitSubject, bool) {
	switch kind {
	case "node":
		if h, ok := p.homes.At(name); ok {
			return waitSubject{kind: kind, name: h.spec.Target, home: h}, true
		}
	case "app":
		if a, ok := p.app(name); ok {
			return waitSubject{kind: kind, name: a.cfg.Slug, home: a.home, app: a}, true
		}
	}
	return waitSubject{}, false
}

// homeID is the id of the home s waits for, "" for an app outside any.
func (s waitSubject) homeID(p *Path) string {
	if s.home == nil {
		return ""
	}
	return p.current(s.home).spec.ID
}

// statusURL is the path of s's public status.
func (s waitSubject) statusURL() string {
	return "/_wakegate/wake/" + s.kind + "/" + url.PathEscape(s.name)
}

// root is the path of s's own page, where a refresh goes when it has no
// usable to parameter.
func (s waitSubject) root() string {
	if s.kind == "app" {
		return "/apps/" + url.PathEscape(s.name) + "/"
	}
	return "/node/" + url.PathEscape(s.name) + "/"
}

// serveWaitingPage answers a browser's navigation, whose route's home is
// waking, with the waiting page (503, Retry-After). since is when the
// navigation began to wait: the page's clock starts at that wait at least,
// so that a page served once the home's own wake is over (an app whose
// route still waits for its self-probe) does not say 0 s to a browser
// that has waited the whole hold.
func (p *Path) serveWaitingPage(w http.ResponseWriter, r *http.Request, route *forward.Route, since time.Time) {
	s, ok := p.waitSubjectOf(route.Kind, route.Name)
	if !ok {
		p.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no such home or app."))
		return
	}
	v := p.waitView(r.Context(), s, false)
	if waited := time.Since(since); v.Phase != wakerecord.Failed && waited > v.Elapsed {
		v.Elapsed = waited
	}
	p.renderWaiting(w, r, s, v, r.URL.RequestURI())
}

// renderWaiting writes the waiting page of s in state v; retry is the
// page's own URL (a local path).
func (p *Path) renderWaiting(w http.ResponseWriter, r *http.Request, s waitSubject, v wakerecord.View, retry string) {
	retryAfter := p.conf().RetryAfter
	d := web.Waiting{Name: p.displayName(s), Phase: v.Phase, PhaseText: PhaseText(v.Phase),
		StatusURL: s.statusURL(), RetryURL: retry, RequestID: r.Header.Get("X-Request-Id"),
		RefreshSeconds: WaitRefreshSeconds, Elapsed: v.Elapsed, Expected: p.expectedWake(r.Context(), s),
		Nonce: web.NewNonce()}
	d.RefreshURL = d.StatusURL + "?to=" + url.QueryEscape(retry)
	status := http.StatusServiceUnavailable
	if v.Phase == wakerecord.Failed {
		c := p.classify(r, v.Err) // the cause goes to the log, with the request id
		d.Code, d.Message, status = c.Code, c.Message, c.Status
		if c.RetryAfter > 0 {
			retryAfter = c.RetryAfter
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	page := p.waitingTemplate(s)
	h.Set("Content-Security-Policy", page.CSP(d.Nonce))
	h.Set("X-Frame-Options", page.FrameOptions())
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", strconv.Itoa(fault.RetryAfterSeconds(retryAfter)))
	w.WriteHeader(status)
	if err := page.Render(w, d); err != nil {
		p.log.Warn("waiting page", "err", err, "request_id", d.RequestID)
	}
}

// waitingTemplate is the page s waits on: the app's own theme, else its
// home's, else the gateway's page (wake.waiting_page or
// wake.waiting_theme), else the default one. The checks let no unknown
// theme through.
func (p *Path) waitingTemplate(s waitSubject) *web.WaitingTemplate {
	theme := ""
	if s.app != nil {
		theme = s.app.cfg.WaitingTheme
	}
	if id := s.homeID(p); theme == "" && id != "" {
		theme = p.conf().Names.WaitingTheme(id)
	}
	if t, ok := web.Theme(theme); ok {
		return t
	}
	if t := p.conf().Waiting; t != nil {
		return t
	}
	return web.DefaultWaiting()
}

// displayName is what the waiting page calls s: a home's display_name,
// else its target; an app's slug.
func (p *Path) displayName(s waitSubject) string {
	if s.kind == "node" {
		if n := p.conf().Names.DisplayName(s.homeID(p)); n != "" {
			return n
		}
	}
	return s.name
}

// expectedWake is how long a wake of s's home usually takes: the median of
// its recent wakes here, else its stored last wake, else zero (unknown).
func (p *Path) expectedWake(ctx context.Context, s waitSubject) time.Duration {
	id := s.homeID(p)
	if id == "" {
		return 0
	}
	if d := p.engine.ExpectedWake(id); d > 0 {
		return d
	}
	if rec, err := p.records.GetHome(ctx, id); err == nil {
		return rec.LastWakeLatency
	}
	return 0
}

// waitView is where s's wake stands. For an app it is its home's wake
// until the home is ready, then the app's own check: ready once its route
// is published, failed when its phase is failed or stopped. refresh asks
// for a fresh observation of an app whose home is ready (it never wakes
// the home).
func (p *Path) waitView(ctx context.Context, s waitSubject, refresh bool) wakerecord.View {
	if s.app == nil {
		v, ok := p.engine.View(s.homeID(p))
		if !ok {
			return wakerecord.View{Phase: wakerecord.Asleep}
		}
		return v
	}
	app, slug := s.app, s.app.cfg.Slug
	if p.published(app) {
		return wakerecord.View{Phase: wakerecord.Ready}
	}
	var v wakerecord.View
	if id := s.homeID(p); id != "" {
		var ok bool
		if v, ok = p.engine.View(id); ok && v.Phase != wakerecord.Ready {
			return v
		}
	}
	if refresh {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = p.observer.Refresh(rctx, slug, "")
		cancel()
		if p.published(app) {
			return wakerecord.View{Phase: wakerecord.Ready}
		}
	}
	st, _ := p.observer.Status(slug)
	if st.Phase == appstatus.PhaseFailed || st.Phase == appstatus.PhaseStopped {
		return wakerecord.View{Phase: wakerecord.Failed, Err: appNotReady(st, p.conf().RetryAfter)}
	}
	return wakerecord.View{Phase: wakerecord.Probing, Elapsed: v.Elapsed}
}

// report is v as the public may see it; a failure's cause goes to the log
// with r's request id.
func (p *Path) report(r *http.Request, v wakerecord.View) WaitReport {
	rep := WaitReport{Phase: v.Phase, ElapsedMS: v.Elapsed.Milliseconds()}
	switch v.Phase {
	case wakerecord.Ready:
		// How long the wake took, measured here: the page shows it as
		// the wait, whatever its own clock lost to a slow delivery.
		rep.Ready = true
	case wakerecord.Failed:
		c := p.classify(r, v.Err)
		rep.Code, rep.Error, rep.RequestID = c.Code, c.Message, r.Header.Get("X-Request-Id")
	}
	return rep
}

// serveWakeStatus answers GET /_wakegate/wake/{kind}/{name}: the status
// stream, the refresh target of a page without JavaScript, or one JSON
// report, for callers the home's or app's access policy admits.
func (p *Path) serveWakeStatus(w http.ResponseWriter, r *http.Request) {
	s, ok := p.waitSubjectOf(chi.URLParam(r, "kind"), chi.URLParam(r, "name"))
	if !ok {
		p.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no such home or app."))
		return
	}
	if s.app != nil {
		if !p.admit(w, r, "app", s.name, s.app.home) { // access.go
			return
		}
	} else if !p.admit(w, r, "node", s.name, s.home) {
		return
	}
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, "text/event-stream"):
		StreamWake(w, r, waitWatch{p, s}, s.app != nil, p.drain)
	case strings.Contains(accept, "text/html"):
		p.refreshWaiting(w, r, s)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(p.report(r, p.waitView(r.Context(), s, true)))
	}
}

// refreshWaiting is the meta refresh target of a page without JavaScript:
// a 303 to the page's own URL once the home is ready (or asleep: loading
// the page wakes it), else the page in its current state.
func (p *Path) refreshWaiting(w http.ResponseWriter, r *http.Request, s waitSubject) {
	to := r.URL.Query().Get("to")
	if !LocalPath(to) {
		to = s.root()
	}
	v := p.waitView(r.Context(), s, true)
	if v.Phase == wakerecord.Ready || v.Phase == wakerecord.Asleep {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	p.renderWaiting(w, r, s, v, to)
}

// waitWatch is what the status stream of s watches (StreamWake).
type waitWatch struct {
	p *Path
	s waitSubject
}

// Changed returns the engine's signals of the next change of s's home and
// of its app.
func (ww waitWatch) Changed() (home, app <-chan struct{}) {
	if id := ww.s.homeID(ww.p); id != "" {
		home = ww.p.engine.Changed(id)
	}
	if ww.s.app != nil {
		app = ww.p.engine.Changed(ww.s.app.cfg.Slug)
	}
	return home, app
}

// View is where s's wake stands.
func (ww waitWatch) View(ctx context.Context, refresh bool) wakerecord.View {
	return ww.p.waitView(ctx, ww.s, refresh)
}

// Report is v as the public may see it.
func (ww waitWatch) Report(r *http.Request, v wakerecord.View) WaitReport {
	return ww.p.report(r, v)
}
