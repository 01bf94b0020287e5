package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/wakegate/wakegate/route"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/wake"
)

// routes builds the public handler: hygiene first (framing, path
// canonicalisation, request id), then host routes, the app and home path
// routes (fastroute.go), and the router for everything else.
func (g *Gateway) routes() http.Handler {
	return g.hygiene(g.byHost(g.pathRoutes(g.router()))) // host routes: hosts.go
}

// router is the public listener's router: every route, the app and home
// routes included (pathRoutes serves those before it, the same way).
func (g *Gateway) router() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no route for this path."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// No kind of its own: the router's one status, with a fixed sentence.
		proxy.WriteClassified(w, r, proxy.Classified{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: "This method is not allowed on this path."})
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if g.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		if g.storeUnwritable() != "" {
			// The gateway cannot record wakes or admin changes: the edge
			// should send new traffic elsewhere. Warm homes still serve.
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: store unwritable\n"))
			return
		}
		if g.degraded() != "" {
			// Still ready: warm homes serve; wakes answer 503 meanwhile.
			_, _ = w.Write([]byte("degraded\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	g.rootRoutes(r) // GET / and /favicon.ico: rootpage.go
	r.Post("/_wakegate/ready", g.serveReadySignal)
	r.Get("/_wakegate/wake/{kind}/{name}", g.serveWakeStatus)
	slug := func(serve func(http.ResponseWriter, *http.Request, string), param string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, chi.URLParam(r, param)) })
	}
	r.Handle("/apps/{slug}", slug(g.redirectSlash, "slug"))
	r.Handle("/apps/{slug}/*", slug(g.serveApp, "slug"))
	r.Handle("/node/{target}", slug(g.serveNode, "target"))
	r.Handle("/node/{target}/*", slug(g.serveNode, "target"))
	return r
}

// hygiene runs before routing: it refuses ambiguous framing and paths that
// do not canonicalise, sets the request id, tracks the request for the drain
// and writes the access log.
func (g *Gateway) hygiene(next http.Handler) http.Handler {
	access := *g.cfg.Log.Access
	minResponseRate := *g.cfg.Server.MinResponseRate > 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.inflight.Add(1)
		// rw.end releases the request: when this handler returns, or
		// when its WebSocket relay ends (Detach).
		rw := &recorder{ResponseWriter: w, end: reqEnd{g: g}}
		defer rw.end.run()
		if minResponseRate {
			// The last response on this connection may have left a write
			// deadline for its buffered tail (proxy/rate.go).
			proxy.LiftWriteDeadline(w)
		}
		// The probe header goes first, from every request; only the
		// gateway's own self-probe keeps its mark (apps.go).
		r, probe := g.routeTab.probe.hygiene(r)
		// The request id comes before any answer, refusals included.
		trusted := g.trustedPeer(r)
		if id := r.Header.Get("X-Request-Id"); id == "" || !trusted || len(id) > 128 {
			g.setRequestID(r, rw)
		}
		if trusted {
			// A trusted proxy's request counts for the client it forwards
			// for, under the same cap as a client's own connections.
			ip, ok := g.connLimit.TakeForwarded(r)
			if !ok {
				g.metrics.ConnsRefused().Inc()
				g.writeError(w, r, fault.New(fault.Limited, "too_many_connections",
					"This client has too many connections open."))
				return
			}
			rw.end.client = ip
		}
		if err := edge.FramingProblem(r.Context()); err != nil {
			w.Header().Set("Connection", "close")
			msg := "A request may not carry both Content-Length and Transfer-Encoding."
			if !edge.IsConflict(err) {
				msg = "The framing of a request on this connection could not be followed."
			}
			g.writeError(w, r, fault.New(fault.Invalid, "bad_framing", msg))
			return
		}
		if r.RequestURI != "*" {
			sent := r.URL.EscapedPath()
			p, raw, err := proxy.CanonicalPath(sent)
			if err != nil {
				g.writeError(w, r, badPath(err))
				return
			}
			if raw != sent { // never a silent reroute (DESIGN rule 21)
				redirectCanonical(w, r, raw)
				return
			}
			r.URL.Path, r.URL.RawPath = p, raw
		}
		if !g.clientAllowed(w, r) { // access.go
			return
		}
		var start time.Time
		if access {
			start = time.Now()
		}
		next.ServeHTTP(rw, r)
		g.metrics.Observe(r.URL.Path, rw.status, rw.fwd, rw.headerAt)
		if !access || probe {
			return
		}
		status := rw.status
		if status == 0 {
			status = http.StatusSwitchingProtocols // hijacked
		}
		level := accessLevel(r, status)
		if !g.log.Enabled(r.Context(), level) {
			return // no record to build
		}
		g.log.Log(r.Context(), level, "access", "method", r.Method, "path", r.URL.Path, "status", status,
			"bytes", rw.bytes, "ms", float64(time.Since(start).Microseconds())/1000,
			"remote", r.RemoteAddr, "request_id", r.Header.Get("X-Request-Id"))
	})
}

// trustedPeer reports whether r's peer is a trusted proxy.
func (g *Gateway) trustedPeer(r *http.Request) bool {
	if len(g.cfg.Server.TrustedNets()) == 0 {
		return false // no address to parse on every request
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || ap.Addr().Zone() != "" {
		return false // not an IP peer; a zoned one is not trusted either
	}
	return trustedProxies(g.cfg.Server.TrustedNets()).hasAddr(ap.Addr())
}

// redirectSlash answers /apps/{slug} with a redirect to /apps/{slug}/.
func (g *Gateway) redirectSlash(w http.ResponseWriter, r *http.Request, slug string) {
	if _, ok := g.appBySlug(slug); !ok {
		g.writeError(w, r, errNoApp())
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
func (g *Gateway) serveApp(w http.ResponseWriter, r *http.Request, slug string) {
	app, ok := g.appBySlug(slug)
	if !ok {
		g.writeError(w, r, errNoApp())
		return
	}
	g.serveAppAt(w, r, app, app.Prefix())
}

// serveAppAt serves a request for app whose path carries prefix before
// the app's own path ("" on the app's own host; hosts.go).
func (g *Gateway) serveAppAt(w http.ResponseWriter, r *http.Request, app *route.App, prefix string) {
	route := newRoute(w, "app", app.Config().Slug)
	if app.Config().StripPrefix && prefix != "" {
		route.StripPrefix = prefix
	}
	// Users reach only published routes; the self-probe reaches candidates.
	if isSelfProbe(r) {
		g.serveSelfProbe(w, r, app, route)
		return
	}
	if !g.admit(w, r, "app", app.Config().Slug, app.Home()) { // access.go
		return
	}
	if !g.routeTab.published(app) && !g.awaitApp(w, r, app, route) {
		return
	}
	defer notePassive(w, app) // apps_pulse.go
	if app.Home() == nil {
		route.Upstream = app.Upstream()
		markForward(w)
		g.proxy.Serve(w, r, route)
		return
	}
	g.serveHome(w, r, g.current(app.Home()), route, strings.TrimPrefix(r.URL.Path, prefix))
}

// serveNode serves /node/{target} and /node/{target}/...
func (g *Gateway) serveNode(w http.ResponseWriter, r *http.Request, target string) {
	h, ok := g.homeAt(target)
	if !ok {
		g.writeError(w, r, fault.New(fault.NotFound, wake.CodeHomeNotFound, "There is no such home."))
		return
	}
	g.serveHome(w, r, h, g.nodeRoute(w, h), strings.TrimPrefix(r.URL.Path, "/node/"+h.Spec().Target))
}

// nodeRoute is the route of a request for home h.
func (g *Gateway) nodeRoute(w http.ResponseWriter, h *route.Home) *proxy.Route {
	return newRoute(w, "node", h.Spec().Target)
}

// serveHome counts the session, makes sure the home is awake and forwards.
// The session is counted before the home is resolved, so that an idle
// suspend either sees it or the request finds the verdict gone and waits.
func (g *Gateway) serveHome(w http.ResponseWriter, r *http.Request, h *route.Home, route *proxy.Route, sub string) {
	if route.Kind == "node" && !g.admit(w, r, "node", h.Spec().Target, h) { // access.go
		return
	}
	id := h.Spec().ID
	c := g.sessions.Begin(id)
	if proxy.IsWebSocket(r) {
		g.sessions.MarkWebSocket(c)
		// A WebSocket's session lasts as long as its relay, which may
		// outlive this handler (recorder.Detach).
		end := func() {
			g.sessions.UnmarkWebSocket(c)
			g.sessions.End(c)
		}
		if !atEnd(w, end) {
			defer end()
		}
	} else {
		defer g.sessions.End(c)
	}
	route.HomeID = id
	route.RelayToken = h.Token()

	eng := g.engine
	if a, ok := eng.WarmAwake(id); ok {
		g.forward(w, r, h, route, a)
		return
	}
	if err := g.wakeRefused(r, id, sub); err != nil {
		g.writeError(w, r, err)
		return
	}
	done, ok := g.waitSlot(w, r, id)
	if !ok {
		return
	}
	defer done()
	if isNavigation(r) {
		release, ok := g.holdSlot(w, r, id, route)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), *g.conf().Wake.Hold)
		a, err := eng.EnsureAwake(ctx, id)
		cancel()
		release()
		if err != nil {
			if fe, ok := fault.As(err); ok && fe.Code == wake.CodeHomeWaking && r.Context().Err() == nil {
				g.serveWaitingPage(w, r, route)
				return
			}
			g.writeError(w, r, err)
			return
		}
		g.forward(w, r, h, route, a)
		return
	}
	// An API or WebSocket caller of a socket-activated home goes as soon
	// as the home's process is started: its request waits in the home's
	// accept queue while it boots. (A browser's page waits for the verdict
	// above, so that a long boot shows the waiting page.)
	ctx, cancel := context.WithTimeout(r.Context(), g.conf().Wake.WakeTimeout)
	var a wake.Awake
	var err error
	if g.mayQueue(h) {
		a, err = eng.EnsureQueued(ctx, id)
	} else {
		a, err = eng.EnsureAwake(ctx, id)
	}
	cancel()
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	g.forward(w, r, h, route, a)
}

// forward sends r to home h, awake as a says.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, h *route.Home, route *proxy.Route, a wake.Awake) {
	route.Upstream = g.appUpstream(route, a.Endpoint)
	route.Waited = a.Waited
	id := route.HomeID
	markForward(w)
	// A failed forward drops the warm verdict, replayable or not, so the
	// next request wakes or probes the home again; a replayable one is
	// retried once after a fresh wake.
	hk := g.hooks(h)
	route.OnFailure, route.Retry = hk.OnFailure, hk.Retry
	if a.Queued() {
		// Sent before the home was proven ready: a forward that cannot
		// reach it (its boot failed, and the queue was reset) waits for
		// the wake's outcome instead of starting another wake.
		route.Retry = func(ctx context.Context) (*url.URL, error) {
			ctx, cancel := context.WithTimeout(ctx, g.conf().Wake.WakeTimeout)
			defer cancel()
			return g.engine.Settled(ctx, id, a)
		}
	}
	// The proxy takes the home's slot once the request's body has been
	// read ahead (proxy/spool.go), so that a slow upload holds only its
	// own connection.
	route.Acquire = func(w http.ResponseWriter, r *http.Request) (func(), bool) {
		slot, err := g.homeConns.Acquire(r, id) // route/homeconns.go
		if err != nil {
			g.writeError(w, r, err)
			return nil, false
		}
		return func() { g.homeConns.Release(slot) }, true
	}
	g.proxy.Serve(w, r, route)
}

// mayQueue reports whether a caller of home h may be forwarded before
// the home is proven ready (wake.EnsureQueued): only when the home's boot,
// bounded by its ready timeout, cannot outlast the forward's own wait for
// an answer (proxy.home_response_header_timeout), which would end the
// request with a 504 while the home still boots.
func (g *Gateway) mayQueue(h *route.Home) bool {
	c := g.conf()
	ready := h.Spec().ReadyTimeout
	if ready <= 0 {
		ready = c.Wake.ReadyTimeout
	}
	return ready <= c.Proxy.HomeResponseHeaderTimeout
}

// wakeRefused returns the answer for a request that must not wake home id
// (the no-wake rules: its user agent or its path sub inside the home) while
// the home sleeps, or nil when the request may go on and wake it.
func (g *Gateway) wakeRefused(r *http.Request, id, sub string) error {
	if g.noWake(r, sub) && g.engine.Sleeping(id) {
		return wake.Asleep(g.conf().Wake.RetryAfter)
	}
	return nil
}

// noWake reports whether r must not wake a sleeping home.
func (g *Gateway) noWake(r *http.Request, sub string) bool {
	for _, p := range g.conf().Wake.NoWakePaths {
		if sub == p {
			return true
		}
	}
	if ua := r.UserAgent(); ua != "" {
		for _, re := range g.conf().Wake.NoWakeAgents() {
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
func (g *Gateway) serveReadySignal(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get(g.cfg.Proxy.RelayHeader)
	id, ok := g.engine.HomeForToken(tok)
	if !ok {
		g.writeError(w, r, fault.New(fault.Unauthorized, "bad_token", "A home's relay token is required."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"home": id, "signalled": g.engine.Ready(id, tok)})
}

// writeError answers r with err through the one mapper: the caller gets a
// code, a sentence and the request id; the log gets the cause.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	proxy.WriteClassified(w, r, g.classify(r, err))
}

// classify maps err to its public answer and logs the cause and the hint,
// when there is one, with the request id.
func (g *Gateway) classify(r *http.Request, err error) proxy.Classified {
	c := proxy.StatusOf(err)
	if c.Cause != "" {
		level := slog.LevelInfo // the caller's mistake
		if c.Status >= http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		g.log.Log(r.Context(), level, "request failed", "path", r.URL.Path, "status", c.Status, "code", c.Code,
			"request_id", r.Header.Get("X-Request-Id"), "cause", c.Cause, "hint", c.Hint)
	}
	return c
}

// redirectCanonical answers a request whose path is not canonical with a
// 308 to its canonical form raw (an absolute path: the canonical form has
// no "//" at its start, so the Location never names another host), so a
// cache in front and the gateway agree on which route a URL names.
func redirectCanonical(w http.ResponseWriter, r *http.Request, raw string) {
	loc := raw
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusPermanentRedirect)
}

// errNoApp answers a request for an app that does not exist.
func errNoApp() error { return fault.New(fault.NotFound, "app_not_found", "There is no such app.") }

// badPath answers a request whose path CanonicalPath refused, naming the
// rule it broke (a fixed phrase) but not the path.
func badPath(err error) error {
	msg := "The request path is not canonical."
	var pe *proxy.PathError
	if errors.As(err, &pe) {
		msg = "The request path is refused: " + pe.Reason + "."
	}
	return fault.Wrap(fault.Invalid, "bad_path", msg, err)
}

// recorder captures the status and size of a response for the access log
// and the metrics. Unwrap lets http.ResponseController reach Flush and
// Hijack.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// fwd is when the request was forwarded (after any wake wait), and
	// headerAt when its response headers were written.
	fwd, headerAt time.Time
	// end is what the request releases when it is over.
	end reqEnd
	// route is the request's route (newRoute), and reqID the value of its
	// X-Request-Id header when the gateway set it (setRequestID): one
	// allocation for the three.
	route proxy.Route
	reqID [1]string
}

// reqEnd is what a request releases when it is over: the functions added
// to it, last added first, then its forwarded client's place under the
// connection cap, and its place in the in-flight count last.
type reqEnd struct {
	g   *Gateway // nil once released
	fns []func()
	// client is whom a trusted proxy forwarded the request for, counted
	// by ConnLimit.TakeForwarded until the request is over (invalid when
	// not counted).
	client netip.Addr
}

// add has f run when the request is over.
func (e *reqEnd) add(f func()) { e.fns = append(e.fns, f) }

// run releases the request; it does nothing when run again.
func (e *reqEnd) run() {
	for i := len(e.fns) - 1; i >= 0; i-- {
		e.fns[i]()
	}
	e.fns = nil
	if e.g != nil {
		e.g.connLimit.Release(e.client)
		e.g.inflight.Done()
		e.g = nil
	}
}

// Detach hands the end of the request to the WebSocket relay the proxy
// is about to start (proxy.Detacher): the handler returns at once, and
// the request (its session, its place in the drain's count) ends when the
// relay does, or when the hard stop cuts it.
func (r *recorder) Detach() (context.Context, func()) {
	e := new(reqEnd)
	*e, r.end = r.end, reqEnd{}
	if e.g == nil {
		return context.Background(), e.run // released already
	}
	return e.g.hardStop, e.run
}

// atEnd has f run when the request served through w is over, when w is
// the recorder hygiene wrapped it in; it reports whether it is.
func atEnd(w http.ResponseWriter, f func()) bool {
	rw, ok := w.(*recorder)
	if ok {
		rw.end.add(f)
	}
	return ok
}

var _ proxy.Detacher = (*recorder)(nil)

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
		r.headerAt = time.Now()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.headerAt = time.Now()
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
