package route

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/go-chi/chi/v5"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/proxy"
)

// redirectSlash answers /apps/{slug} with a redirect to /apps/{slug}/.
func (p *Path) redirectSlash(w http.ResponseWriter, r *http.Request, slug string) {
	if _, ok := p.app(slug); !ok {
		p.writeError(w, r, errNoApp())
		return
	}
	u := *r.URL
	u.Path += "/"
	if u.RawPath != "" {
		u.RawPath += "/"
	}
	http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
}

// serveApp serves /apps/{slug}/...
func (p *Path) serveApp(w http.ResponseWriter, r *http.Request, slug string) {
	app, ok := p.app(slug)
	if !ok {
		p.writeError(w, r, errNoApp())
		return
	}
	p.serveAppAt(w, r, app, app.prefix)
}

// serveAppAt serves a request for app whose path carries prefix before
// the app's own path ("" on the app's own host; hosts.go).
func (p *Path) serveAppAt(w http.ResponseWriter, r *http.Request, app *App, prefix string) {
	if edge.HasEncodedSlash(r.URL.RawPath) && !app.cfg.EncodedSlashes {
		p.writeError(w, r, errEncodedSlash("app "+app.cfg.Slug+" does not take them",
			"set encoded_slashes: true on the app if it puts %2F in its paths"))
		return
	}
	route := newRoute(w, "app", app.cfg.Slug)
	if app.cfg.StripPrefix && prefix != "" {
		route.StripPrefix = prefix
	}
	// Users reach only published routes; the self-probe reaches candidates.
	if IsSelfProbe(r) {
		p.serveSelfProbe(w, r, app, route)
		return
	}
	if !p.admit(w, r, "app", app.cfg.Slug, app.home) { // access.go
		return
	}
	if !p.published(app) && !p.awaitApp(w, r, app, route) {
		return
	}
	defer notePassive(w, app) // pulse.go
	if app.home == nil {
		route.Upstream = app.upstream
		markForward(w)
		p.proxy.Serve(w, r, route)
		return
	}
	p.serveHome(w, r, p.current(app.home), route, strings.TrimPrefix(r.URL.Path, prefix))
}

// serveNode serves /node/{target} and /node/{target}/...
func (p *Path) serveNode(w http.ResponseWriter, r *http.Request, target string) {
	if edge.HasEncodedSlash(r.URL.RawPath) {
		p.writeError(w, r, errEncodedSlash("home routes do not take them", "publish the home's app with encoded_slashes: true"))
		return
	}
	h, ok := p.homes.At(target)
	if !ok {
		p.writeError(w, r, fault.New(fault.NotFound, homefault.CodeHomeNotFound, "There is no such home."))
		return
	}
	p.serveHome(w, r, h, p.nodeRoute(w, h), strings.TrimPrefix(r.URL.Path, "/node/"+h.spec.Target))
}

// nodeRoute is the route of a request for home h.
func (p *Path) nodeRoute(w http.ResponseWriter, h *Home) *forward.Route {
	return newRoute(w, "node", h.spec.Target)
}

// serveHome counts the session, makes sure the home is awake and forwards.
// The session is counted before the home is resolved, so that an idle
// suspend either sees it or the request finds the verdict gone and waits.
func (p *Path) serveHome(w http.ResponseWriter, r *http.Request, h *Home, route *forward.Route, sub string) {
	if route.Kind == "node" && !p.admit(w, r, "node", h.spec.Target, h) { // access.go
		return
	}
	id := h.spec.ID
	c := p.sessions.Begin(id)
	if proxy.IsWebSocket(r) {
		p.sessions.MarkWebSocket(c)
		// A WebSocket's session lasts as long as its relay, which may
		// outlive this handler (Recorder.Detach).
		end := func() {
			p.sessions.UnmarkWebSocket(c)
			p.sessions.End(c)
		}
		if !atEnd(w, end) {
			defer end()
		}
	} else {
		defer p.sessions.End(c)
	}
	route.HomeID = id
	route.RelayToken = h.Token()

	eng := p.engine
	if a, ok := eng.WarmAwake(id); ok {
		p.forward(w, r, h, route, a)
		return
	}
	if err := p.wakeRefused(r, id, sub); err != nil {
		p.writeError(w, r, err)
		return
	}
	done, ok := p.waitSlot(w, r, id)
	if !ok {
		return
	}
	defer done()
	if isNavigation(r) {
		since := time.Now()
		release, ok := p.holdSlot(w, r, id, route, since)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), p.conf().Hold)
		a, err := eng.EnsureAwake(ctx, id)
		cancel()
		release()
		if err != nil {
			if fe, ok := fault.As(err); ok && fe.Code == homefault.CodeHomeWaking && r.Context().Err() == nil {
				p.serveWaitingPage(w, r, route, since)
				return
			}
			p.writeError(w, r, err)
			return
		}
		p.forward(w, r, h, route, a)
		return
	}
	// An API or WebSocket caller of a socket-activated home goes as soon
	// as the home's process is started: its request waits in the home's
	// accept queue while it boots. (A browser's page waits for the verdict
	// above, so that a long boot shows the waiting page.)
	ctx, cancel := context.WithTimeout(r.Context(), p.conf().WakeTimeout)
	var a homes.Awake
	var err error
	if p.mayQueue(h) {
		a, err = eng.EnsureQueued(ctx, id)
	} else {
		a, err = eng.EnsureAwake(ctx, id)
	}
	cancel()
	if err != nil {
		p.writeError(w, r, err)
		return
	}
	p.forward(w, r, h, route, a)
}

// forward sends r to home h, awake as a says.
func (p *Path) forward(w http.ResponseWriter, r *http.Request, h *Home, route *forward.Route, a homes.Awake) {
	route.Upstream = p.appUpstream(route, a.Endpoint)
	route.Waited = a.Waited
	id := route.HomeID
	markForward(w)
	// A failed forward drops the warm verdict, replayable or not, so the
	// next request wakes or probes the home again; a replayable one is
	// retried once after a fresh wake.
	hk := p.hooks(h)
	route.OnFailure, route.Retry = hk.OnFailure, hk.Retry
	if a.Queued() {
		// Sent before the home was proven ready: a forward that cannot
		// reach it (its boot failed, and the queue was reset), or that it
		// closes unanswered (stopped when its wake failed), waits for the
		// wake's outcome instead of starting another wake.
		route.Queued = true
		route.Retry = func(ctx context.Context) (*url.URL, error) {
			ctx, cancel := context.WithTimeout(ctx, p.conf().WakeTimeout)
			defer cancel()
			return p.engine.Settled(ctx, id, a)
		}
	}
	// The proxy takes the home's slot once the request's body has been
	// read ahead (proxy/spool.go), so that a slow upload holds only its
	// own connection.
	route.Acquire = func(w http.ResponseWriter, r *http.Request) (func(), bool) {
		slot, err := p.conns.Acquire(r, id) // route/homeconns.go
		if err != nil {
			p.writeError(w, r, err)
			return nil, false
		}
		return func() { p.conns.Release(slot) }, true
	}
	p.proxy.Serve(w, r, route)
}

// mayQueue reports whether a caller of home h may be forwarded before
// the home is proven ready (Engine.EnsureQueued): only when the home's boot,
// bounded by its ready timeout, cannot outlast the forward's own wait for
// an answer (proxy.home_response_header_timeout), which would end the
// request with a 504 while the home still boots.
func (p *Path) mayQueue(h *Home) bool {
	c := p.conf()
	ready := h.spec.ReadyTimeout
	if ready <= 0 {
		ready = c.ReadyTimeout
	}
	return ready <= c.HomeResponseHeaderTimeout
}

// wakeRefused returns the answer for a request that must not wake home id
// (the no-wake rules: its user agent or its path sub inside the home) while
// the home sleeps, or nil when the request may go on and wake it.
func (p *Path) wakeRefused(r *http.Request, id, sub string) error {
	if p.noWake(r, sub) && p.engine.Sleeping(id) {
		return homefault.Asleep(p.conf().RetryAfter)
	}
	return nil
}

// noWake reports whether r must not wake a sleeping home.
func (p *Path) noWake(r *http.Request, sub string) bool {
	for _, p := range p.conf().NoWakePaths {
		if sub == p {
			return true
		}
	}
	if ua := r.UserAgent(); ua != "" {
		for _, re := range p.conf().NoWakeAgents {
			if re.MatchString(ua) {
				return true
			}
		}
	}
	return false
}

// isNavigation reports whether r is a browser loading a page: a GET that
// accepts HTML and is not a WebSocket, fetch or asset request.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet || r.Header.Get("Upgrade") != "" {
		return false
	}
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" && m != "navigate" {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// serveReadySignal lets a home end its readiness wait at once: POST
// /_wakegate/ready with its relay token in the relay header.
func (p *Path) serveReadySignal(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get(p.relayHeader)
	id, ok := p.engine.HomeForToken(tok)
	if !ok {
		p.writeError(w, r, fault.New(fault.Unauthorized, "bad_token", "A home's relay token is required."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"home": id, "signalled": p.engine.Ready(id, tok)})
}

// writeError answers r with err through the one mapper: the caller gets a
// code, a sentence and the request id; the log gets the cause.
func (p *Path) writeError(w http.ResponseWriter, r *http.Request, err error) {
	c := p.classify(r, err)
	if c.Code == homefault.CodeWakeRateLimited {
		proxy.MarkLimit(w, "wake")
	}
	proxy.WriteClassified(w, r, c)
}

// classify maps err to its public answer and logs the cause and the hint,
// when there is one, with the request id.
func (p *Path) classify(r *http.Request, err error) fault.Response {
	c := proxy.StatusOf(err)
	if c.Cause != "" {
		level := slog.LevelInfo // the caller's mistake
		if c.Status >= http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		attrs := []any{"path", edge.LogPath(r.URL.Path, r.URL.RawPath), "status", c.Status, "code", c.Code,
			"request_id", r.Header.Get("X-Request-Id"), "cause", c.Cause}
		if c.Hint != "" {
			attrs = append(attrs, "hint", c.Hint)
		}
		p.log.Log(r.Context(), level, "request failed", attrs...)
	}
	return c
}

// errNoApp answers a request for an app that does not exist.
func errNoApp() error { return fault.New(fault.NotFound, "app_not_found", "There is no such app.") }

// Handler serves the host-routed names and the app and home path routes,
// and hands every other request to router, which has the path's routes
// mounted as well (Mount).
func (p *Path) Handler(router http.Handler) http.Handler {
	return p.ByHost(p.pathRoutes(p.NoEncodedSlash(router))) // hosts.go, fastroute.go
}

// NoEncodedSlash refuses, before next (the router), a request whose path
// holds an encoded slash: only an app that takes them (serveAppAt) does.
// A method the router routes nowhere is left to it (405).
func (p *Path) NoEncodedSlash(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if edge.HasEncodedSlash(r.URL.RawPath) && routerMethod(r.Method) {
			p.writeError(w, r, errEncodedSlash("no app route takes this path", ""))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// errEncodedSlash refuses a path with an encoded slash (400 bad_path, as
// edge.CanonicalPath's refusal): why for the log, with the operator's hint.
func errEncodedSlash(why, hint string) error {
	return fault.Wrap(fault.Invalid, "bad_path", "The request path is refused: encoded slash.",
		errors.New("encoded slash (%2F) in the path: "+why)).WithHint(hint)
}

// Mount adds the request path's routes to the gateway's router: GET / and
// /favicon.ico, a home's ready signal, the waiting page's status, and the
// app and home routes (which Handler serves before the router, the same
// way).
func (p *Path) Mount(r chi.Router) {
	p.rootRoutes(r) // rootpage.go
	r.Post("/_wakegate/ready", p.serveReadySignal)
	r.Get("/_wakegate/wake/{kind}/{name}", p.serveWakeStatus)
	slug := func(serve func(http.ResponseWriter, *http.Request, string), param string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, chi.URLParam(r, param)) })
	}
	r.Handle("/apps/{slug}", slug(p.redirectSlash, "slug"))
	r.Handle("/apps/{slug}/*", slug(p.serveApp, "slug"))
	r.Handle("/node/{target}", slug(p.serveNode, "target"))
	r.Handle("/node/{target}/*", slug(p.serveNode, "target"))
}

// WriteError answers r with err through the one mapper: the caller gets a
// code, a sentence and the request id; the log gets the cause.
func (p *Path) WriteError(w http.ResponseWriter, r *http.Request, err error) { p.writeError(w, r, err) }

// ClientAllowed takes a request from its client's rate budget
// (limits.client_rate); false means r was answered 429.
func (p *Path) ClientAllowed(w http.ResponseWriter, r *http.Request) bool {
	return p.clientAllowed(w, r)
}
