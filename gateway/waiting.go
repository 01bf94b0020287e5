package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/wake"
	"github.com/wakegate/wakegate/web"
)

// The waiting page (DESIGN rule 7) and its public status. A browser that
// would wait past wake.hold for a home gets the page; the page watches
// GET /_wakegate/wake/{node|app}/{name}, which admits callers exactly as
// the home or app itself does, and answers in three ways:
//
//   - text/event-stream: a stream of "phase" events, one per change of
//     phase (queued, starting, probing, then ready, failed or asleep), that
//     ends with the first of the last three;
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

const (
	// waitRefreshEvery is how often a status stream asks for a fresh
	// observation of an app whose home is ready.
	waitRefreshEvery = 500 * time.Millisecond
	// waitStreamMax ends a status stream; the browser's EventSource
	// connects again after waitRetryMS.
	waitStreamMax = 5 * time.Minute
	// waitKeepAlive is the longest silence on a status stream (a comment
	// line keeps proxies in front from closing it).
	waitKeepAlive = 15 * time.Second
	// waitRetryMS is the EventSource reconnection delay the stream asks for.
	waitRetryMS = 2000
	// waitRefreshSeconds is the meta refresh period of a page without
	// JavaScript.
	waitRefreshSeconds = 2
)

// waitSubject is the home or the app a waiting page waits for.
type waitSubject struct {
	kind string // "node" or "app"
	name string // the target or the slug
	// home is the home that wakes: the node's, or the app's (nil for an app
	// outside any home).
	home *homeRoute
	app  *appRoute // nil for a node
}

// waitReport is one report of the status: all that the public learns.
type waitReport struct {
	// Ready is true once the page may load its URL again (kept for pages
	// that predate Phase).
	Ready     bool   `json:"ready"`
	Phase     string `json:"phase"`
	ElapsedMS int64  `json:"elapsed_ms,omitempty"`
	// Code, Error and RequestID are a failure's public answer.
	Code      string `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// waitSubjectOf returns the home (kind "node") or app named name.
func (g *Gateway) waitSubjectOf(kind, name string) (waitSubject, bool) {
	switch kind {
	case "node":
		if h, ok := g.homeAt(name); ok {
			return waitSubject{kind: kind, name: h.spec.Target, home: h}, true
		}
	case "app":
		if a, ok := g.appBySlug(name); ok {
			return waitSubject{kind: kind, name: a.cfg.Slug, home: a.home, app: a}, true
		}
	}
	return waitSubject{}, false
}

// homeID is the id of the home s waits for, "" for an app outside any.
func (s waitSubject) homeID(g *Gateway) string {
	if s.home == nil {
		return ""
	}
	return g.current(s.home).spec.ID
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
// waking, with the waiting page (503, Retry-After).
func (g *Gateway) serveWaitingPage(w http.ResponseWriter, r *http.Request, route *proxy.Route) {
	s, ok := g.waitSubjectOf(route.Kind, route.Name)
	if !ok {
		g.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no such home or app."))
		return
	}
	g.renderWaiting(w, r, s, g.waitView(r.Context(), s, false), r.URL.RequestURI())
}

// renderWaiting writes the waiting page of s in state v; retry is the
// page's own URL (a local path).
func (g *Gateway) renderWaiting(w http.ResponseWriter, r *http.Request, s waitSubject, v wake.WakeView, retry string) {
	retryAfter := g.conf().Wake.RetryAfter
	d := web.Waiting{Name: g.displayName(s), Phase: v.Phase, PhaseText: phaseText(v.Phase),
		StatusURL: s.statusURL(), RetryURL: retry, RequestID: r.Header.Get("X-Request-Id"),
		RefreshSeconds: waitRefreshSeconds, Elapsed: v.Elapsed, Expected: g.expectedWake(r.Context(), s),
		Nonce: web.NewNonce()}
	d.RefreshURL = d.StatusURL + "?to=" + url.QueryEscape(retry)
	status := http.StatusServiceUnavailable
	if v.Phase == wake.ViewFailed {
		c := g.classify(r, v.Err) // the cause goes to the log, with the request id
		d.Code, d.Message, status = c.Code, c.Message, c.Status
		if c.RetryAfter > 0 {
			retryAfter = c.RetryAfter
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", web.WaitingCSP(d.Nonce))
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", strconv.Itoa(fault.RetryAfterSeconds(retryAfter)))
	w.WriteHeader(status)
	if err := g.waitingTemplate().Render(w, d); err != nil {
		g.log.Warn("waiting page", "err", err, "request_id", d.RequestID)
	}
}

// waitingTemplate is the operator's waiting page, or the built-in one.
func (g *Gateway) waitingTemplate() *web.WaitingTemplate {
	if t := g.conf().Wake.WaitingTemplate(); t != nil {
		return t
	}
	return web.DefaultWaiting()
}

// displayName is what the waiting page calls s: a home's display_name,
// else its target; an app's slug.
func (g *Gateway) displayName(s waitSubject) string {
	if s.kind == "node" {
		if n := g.conf().DisplayName(s.homeID(g)); n != "" {
			return n
		}
	}
	return s.name
}

// expectedWake is how long a wake of s's home usually takes: the median of
// its recent wakes here, else its stored last wake, else zero (unknown).
func (g *Gateway) expectedWake(ctx context.Context, s waitSubject) time.Duration {
	id := s.homeID(g)
	if id == "" {
		return 0
	}
	if d := g.engine.ExpectedWake(id); d > 0 {
		return d
	}
	if rec, err := g.store.GetHome(ctx, id); err == nil {
		return rec.LastWakeLatency
	}
	return 0
}

// phaseText is a phase as the page says it before its script runs.
func phaseText(phase string) string {
	switch phase {
	case wake.ViewQueued:
		return "Waiting for a free slot…"
	case wake.ViewProbing:
		return "Checking that it answers…"
	case wake.ViewReady, wake.ViewAsleep:
		return "Opening…"
	case wake.ViewFailed:
		return "The start failed."
	}
	return "Starting…"
}

// waitView is where s's wake stands. For an app it is its home's wake
// until the home is ready, then the app's own check: ready once its route
// is published, failed when its phase is failed or stopped. refresh asks
// for a fresh observation of an app whose home is ready (it never wakes
// the home).
func (g *Gateway) waitView(ctx context.Context, s waitSubject, refresh bool) wake.WakeView {
	if s.app == nil {
		v, ok := g.engine.View(s.homeID(g))
		if !ok {
			return wake.WakeView{Phase: wake.ViewAsleep}
		}
		return v
	}
	app, slug := s.app, s.app.cfg.Slug
	if g.routeTab.published(app) {
		return wake.WakeView{Phase: wake.ViewReady}
	}
	var v wake.WakeView
	if id := s.homeID(g); id != "" {
		var ok bool
		if v, ok = g.engine.View(id); ok && v.Phase != wake.ViewReady {
			return v
		}
	}
	if refresh {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = g.routeTab.apps.Refresh(rctx, slug, "")
		cancel()
		if g.routeTab.published(app) {
			return wake.WakeView{Phase: wake.ViewReady}
		}
	}
	st, _ := g.routeTab.apps.Status(slug)
	if st.Phase == wake.PhaseFailed || st.Phase == wake.PhaseStopped {
		return wake.WakeView{Phase: wake.ViewFailed, Err: appNotReady(st, g.conf().Wake.RetryAfter)}
	}
	return wake.WakeView{Phase: wake.ViewProbing, Elapsed: v.Elapsed}
}

// report is v as the public may see it; a failure's cause goes to the log
// with r's request id.
func (g *Gateway) report(r *http.Request, v wake.WakeView) waitReport {
	rep := waitReport{Phase: v.Phase, ElapsedMS: v.Elapsed.Milliseconds()}
	switch v.Phase {
	case wake.ViewReady:
		rep.Ready, rep.ElapsedMS = true, 0
	case wake.ViewFailed:
		c := g.classify(r, v.Err)
		rep.Code, rep.Error, rep.RequestID = c.Code, c.Message, r.Header.Get("X-Request-Id")
	}
	return rep
}

// serveWakeStatus answers GET /_wakegate/wake/{kind}/{name}: the status
// stream, the refresh target of a page without JavaScript, or one JSON
// report, for callers the home's or app's access policy admits.
func (g *Gateway) serveWakeStatus(w http.ResponseWriter, r *http.Request) {
	s, ok := g.waitSubjectOf(chi.URLParam(r, "kind"), chi.URLParam(r, "name"))
	if !ok {
		g.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no such home or app."))
		return
	}
	if s.app != nil {
		if !g.admit(w, r, "app", s.name, s.app.home) { // access.go
			return
		}
	} else if !g.admit(w, r, "node", s.name, s.home) {
		return
	}
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, "text/event-stream"):
		g.streamWake(w, r, s)
	case strings.Contains(accept, "text/html"):
		g.refreshWaiting(w, r, s)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(g.report(r, g.waitView(r.Context(), s, true)))
	}
}

// refreshWaiting is the meta refresh target of a page without JavaScript:
// a 303 to the page's own URL once the home is ready (or asleep: loading
// the page wakes it), else the page in its current state.
func (g *Gateway) refreshWaiting(w http.ResponseWriter, r *http.Request, s waitSubject) {
	to := r.URL.Query().Get("to")
	if !localPath(to) {
		to = s.root()
	}
	v := g.waitView(r.Context(), s, true)
	if v.Phase == wake.ViewReady || v.Phase == wake.ViewAsleep {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	g.renderWaiting(w, r, s, v, to)
}

// localPath reports whether p is a path on this site: it starts with one
// slash and holds no backslash or control character, so a redirect to it
// never leaves the site.
func localPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\") {
		return false
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// terminalPhase reports whether a status stream ends after phase.
func terminalPhase(phase string) bool {
	return phase == wake.ViewReady || phase == wake.ViewFailed || phase == wake.ViewAsleep
}

// streamWake serves s's status as Server-Sent Events: an event "phase" at
// once and at every change of phase, until one that ends the wait (ready,
// failed, asleep), the caller leaves, the gateway drains, or
// waitStreamMax passes. It looks again only when the engine says that
// something changed for s's home or app (wake.Bus.Changed, which never
// drops), and, for an app whose home is ready, every waitRefreshEvery to
// ask for a fresh observation of the app.
func (g *Gateway) streamWake(w http.ResponseWriter, r *http.Request, s waitSubject) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: " + strconv.Itoa(waitRetryMS) + "\n\n")); err != nil {
		return
	}
	end := time.NewTimer(waitStreamMax)
	defer end.Stop()
	keepAlive := time.NewTimer(waitKeepAlive)
	defer keepAlive.Stop()
	var refreshC <-chan time.Time
	if s.app != nil {
		t := time.NewTicker(waitRefreshEvery)
		defer t.Stop()
		refreshC = t.C
	}
	bus := g.engine.Events()
	ctx := r.Context()
	var last string
	refresh := true
	for {
		// Watched before the view is read: a change after this point
		// closes one of them.
		var homeChanged, appChanged <-chan struct{}
		if id := s.homeID(g); id != "" {
			homeChanged = bus.Changed(id)
		}
		if s.app != nil {
			appChanged = bus.Changed(s.app.cfg.Slug)
		}
		v := g.waitView(ctx, s, refresh)
		refresh = false
		var out []byte
		if key := v.Phase; key != last {
			last = key
			b, _ := json.Marshal(g.report(r, v))
			out = append(append(append(out, "event: phase\ndata: "...), b...), "\n\n"...)
		}
		if out != nil {
			if !g.writeStream(w, rc, out) {
				return
			}
			keepAlive.Reset(waitKeepAlive)
		}
		if terminalPhase(v.Phase) || g.draining.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-g.drainStarted:
			return
		case <-keepAlive.C:
			if !g.writeStream(w, rc, []byte(": keep-alive\n\n")) {
				return
			}
			keepAlive.Reset(waitKeepAlive)
		case <-homeChanged:
		case <-appChanged:
		case <-refreshC:
			refresh = true
		}
	}
}

// writeStream writes b to a status stream and flushes it; false when the
// caller is gone.
func (g *Gateway) writeStream(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}
