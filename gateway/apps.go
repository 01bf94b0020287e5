package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// This file is the gateway's side of app routes: the per-instance route
// table, the self-probe through the gateway's own listener, the loop that
// observes every app each health interval, and the 503 answer of an app
// whose route is not published.
//
// A route starts as a candidate. Only the self-probe reaches a candidate,
// and only a self-probe that passes publishes it (wake.Apps withdraws it
// after failure_threshold failed observations in a row). The self-probe is
// a real request to the address Serve listens on, carrying a token that is
// random per process in ProbeHeader. The token is honoured only on a
// connection the gateway's own probe client opened from a loopback address;
// the header is removed from every inbound request by hygiene (and again by
// the proxy), so an outside caller that sends it, with any value and in any
// letter case, is an ordinary caller.
//
// An app inside a home that sleeps is presented as starting/home-sleeping,
// and its route is unpublished once failure_threshold observations saw it
// asleep (observations never wake a home). A request to it wakes the home
// like /node does, then waits for a self-probe of the woken home: it is
// answered once that passed, within wake_timeout, and a browser gets the
// waiting page after hold. Self-probes count no session, so they never keep
// a home from going idle.

// apState is the gateway's app route machinery.
type apState struct {
	token  string
	apps   *wake.Apps
	routes atomic.Pointer[map[string]*apRoute] // by slug; copy on write (apps_runtime.go)
	loops  rtLoops                             // one observation loop per app (apps_runtime.go)
	change sync.Mutex                          // serialises registrations and removals of apps

	addr   atomic.Pointer[string] // host:port self-probes dial; nil until Serve listens
	conns  sync.Map               // local addresses of open self-probe connections
	tr     *http.Transport
	client *http.Client
}

// apRoute is one app's route in this instance's table.
type apRoute struct {
	app       *appRoute
	published atomic.Bool
	// gen is the stored generation of an app registered through the
	// admin API; 0 for an app of the config.
	gen uint64
}

type apProbeKey struct{}

// apInit builds the route table and the app observer; it runs in New.
func (g *Gateway) apInit(cfg *Config) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	st := &apState{token: hex.EncodeToString(b[:])}
	routes := map[string]*apRoute{}
	dialer := &net.Dialer{Timeout: cfg.Proxy.DialTimeout}
	st.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			a := st.addr.Load()
			if a == nil {
				return nil, errors.New("self-probe: the gateway is not listening yet")
			}
			c, err := dialer.DialContext(ctx, "tcp", *a)
			if err != nil {
				return nil, err
			}
			key := c.LocalAddr().String()
			st.conns.Store(key, struct{}{})
			return &apConn{Conn: c, forget: func() { st.conns.Delete(key) }}, nil
		},
		DisableKeepAlives:  true, // every self-probe proves a fresh connection
		DisableCompression: true,
	}
	st.client = &http.Client{Transport: st.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, ac := range cfg.Apps {
		routes[ac.Slug] = &apRoute{app: g.apps[ac.Slug]}
	}
	st.routes.Store(&routes)
	st.apps = wake.NewApps(wake.AppsOptions{Engine: g.engine, Routes: (*apTable)(g), Events: g.engine.Events(),
		Log: g.log.With("component", "apps")}, cfg.Apps)
	g.ap = st
}

// apConn forgets its local address when closed.
type apConn struct {
	net.Conn
	once   sync.Once
	forget func()
}

func (c *apConn) Close() error {
	c.once.Do(c.forget)
	return c.Conn.Close()
}

// apListening records where self-probes go: the listener's address, with
// an unspecified host replaced by loopback.
func (g *Gateway) apListening(a net.Addr) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s := net.JoinHostPort(host, port)
	g.ap.addr.Store(&s)
}

// apRun observes every app once at once and then every health interval,
// until ctx is done. Serve owns it; observations are skipped while
// draining.
func (g *Gateway) apRun(ctx context.Context) {
	// Apps registered through the admin API get their loops under the
	// same owner (apps_runtime.go).
	g.ap.loops.run(ctx, g.ap.all, g.apObserve)
}

// apObserve is one app's observation loop: it observes the app at once
// and then every every, until ctx is done.
func (g *Gateway) apObserve(ctx context.Context, slug string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if !g.draining.Load() {
			_, _ = g.ap.apps.Refresh(ctx, slug, "")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// apHygiene removes the probe header from r and, when r is one of the
// gateway's own self-probes (its connection was opened by the probe client
// from loopback and it carries the token), marks its context.
func (g *Gateway) apHygiene(r *http.Request) (*http.Request, bool) {
	vals, ok := r.Header[ProbeHeader]
	if !ok {
		return r, false
	}
	r.Header.Del(ProbeHeader)
	if g.ap == nil || len(vals) != 1 {
		return r, false
	}
	if _, own := g.ap.conns.Load(r.RemoteAddr); !own {
		return r, false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		if a := g.ap.addr.Load(); a == nil || ip == nil || !apSameHost(*a, ip) {
			return r, false
		}
	}
	if subtle.ConstantTimeCompare([]byte(vals[0]), []byte(g.ap.token)) != 1 {
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), apProbeKey{}, true)), true
}

func apSameHost(addr string, ip net.IP) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && net.ParseIP(h).Equal(ip)
}

func apIsProbe(r *http.Request) bool {
	v, _ := r.Context().Value(apProbeKey{}).(bool)
	return v
}

// SelfProbeUserAgent is the User-Agent of self-probes; it reaches the
// upstream (the probe token does not).
const SelfProbeUserAgent = "wakegate-self-probe"

// apTable is the Gateway seen as wake.AppRoutes.
type apTable Gateway

// RouteState returns slug's route state; ok is false until Serve listens.
func (t *apTable) RouteState(slug string) (wake.RouteState, bool) {
	r := t.ap.route(slug)
	if r == nil || t.ap.addr.Load() == nil {
		return "", false
	}
	if r.published.Load() {
		return wake.RoutePublished, true
	}
	return wake.RouteCandidate, true
}

// SelfProbe sends GET /apps/{slug}{health.path} to the gateway's own
// listener with the probe token and publishes the route when the status
// passes the app kind's rules.
func (t *apTable) SelfProbe(ctx context.Context, slug string) (int, error) {
	r := t.ap.route(slug)
	a := t.ap.addr.Load()
	if r == nil || a == nil {
		return 0, errors.New("no route to probe")
	}
	ac := r.app.cfg
	u := &url.URL{Scheme: "http", Host: *a, Path: r.app.prefix + ac.Health.Path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("self-probe %s: %w", slug, err)
	}
	req.Header.Set(ProbeHeader, t.ap.token)
	req.Header.Set("Accept", "*/*")
	req.Header.Set("User-Agent", SelfProbeUserAgent)
	res, err := t.ap.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("self-probe %s: %w", slug, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if !wake.StatusPasses(res.StatusCode, ac.API()) {
		return res.StatusCode, fmt.Errorf("self-probe %s: status %d %s", slug, res.StatusCode, http.StatusText(res.StatusCode))
	}
	if !r.published.Swap(true) {
		t.log.Info("route published", "app", slug, "status", res.StatusCode)
		t.engine.Events().Publish(wake.Event{Type: wake.EventRoutePublished, App: slug, Home: ac.Home,
			Message: "the self-probe through the gateway passed (" + strconv.Itoa(res.StatusCode) + ")"})
	}
	return res.StatusCode, nil
}

// Withdraw unpublishes slug's route.
func (t *apTable) Withdraw(slug, reason string) {
	r := t.ap.route(slug)
	if r == nil || !r.published.Swap(false) {
		return
	}
	t.log.Warn("route unpublished", "app", slug, "reason", reason)
	t.engine.Events().Publish(wake.Event{Type: wake.EventRouteWithdrawn, App: slug, Home: r.app.cfg.Home, Reason: reason,
		Message: "the app failed its observations; the route is unpublished until a new self-probe passes"})
}

// apServeProbe forwards a self-probe: to a candidate as well as to a
// published route, never waking a home and counting no session.
func (g *Gateway) apServeProbe(w http.ResponseWriter, r *http.Request, app *appRoute, route *proxy.Route) {
	if app.home == nil {
		route.Upstream = app.upstream
		g.proxy.Serve(w, r, route)
		return
	}
	home := g.current(app.home)
	hs, err := g.engine.HomeState(r.Context(), home.spec.ID)
	if err != nil || hs.Endpoint == "" || (!hs.Warm && hs.Status != registry.StatusRunning) {
		proxy.WriteClassified(w, r, proxy.Classified{Status: http.StatusServiceUnavailable, Code: "home_sleeping",
			Message: "the home is not running; a self-probe does not wake it"})
		return
	}
	u, err := url.Parse(hs.Endpoint)
	if err != nil {
		proxy.WriteError(w, r, fmt.Errorf("home endpoint %q: %w", hs.Endpoint, err))
		return
	}
	route.Upstream = apJoin(u, app.cfg.Path)
	route.RelayToken = home.token
	g.proxy.Serve(w, r, route)
}

// apUpstream is where a request for route goes on a home at endpoint: the
// endpoint, joined with the app's base path for an app.
func (g *Gateway) apUpstream(route *proxy.Route, endpoint *url.URL) *url.URL {
	if route.Kind == "app" {
		if ar, ok := g.appBySlug(route.Name); ok {
			return apJoin(endpoint, ar.cfg.Path)
		}
	}
	return endpoint
}

// apJoin returns u with base appended to its path.
func apJoin(u *url.URL, base string) *url.URL {
	if base == "" {
		return u
	}
	out := *u
	out.Path = strings.TrimSuffix(u.Path, "/") + base
	out.RawPath = ""
	return &out
}

// apPublished reports whether app's route is published.
func (g *Gateway) apPublished(app *appRoute) bool {
	r := g.ap.route(app.cfg.Slug)
	return r != nil && r.app == app && r.published.Load()
}

// apAwait handles a user request for an app whose route is not published:
// it wakes the app's home if it sleeps (like /node), then waits for an
// observation of the app (the self-probe publishes the route). It reports
// true when the route is published and the request may be forwarded, and
// otherwise has answered: 503 with the phase and reason, or the waiting
// page for a browser while the home wakes.
func (g *Gateway) apAwait(w http.ResponseWriter, r *http.Request, app *appRoute, route *proxy.Route) bool {
	slug := app.cfg.Slug
	if g.ap.apps.Stopped(slug) {
		st, _ := g.ap.apps.Status(slug)
		g.apWriteNotReady(w, r, st)
		return false
	}
	nav := isNavigation(r)
	budget := g.cfg.Wake.WakeTimeout
	if nav {
		budget = *g.cfg.Wake.Hold
	}
	ctx, cancel := context.WithTimeout(r.Context(), budget)
	defer cancel()
	since := time.Now().Add(-app.cfg.MinRefresh.Duration())
	if st, _ := g.ap.apps.Status(slug); st.Reason == wake.ReasonHomeSleeping || st.Reason == wake.ReasonHomeWaking {
		// The stored observation saw the home down; it may have woken
		// since (a /node request, a wake that finished): observe again.
		since = time.Now()
	}
	if h := app.home; h != nil && !g.engine.Warm(g.current(h).spec.ID) {
		id := g.current(h).spec.ID
		if g.noWake(r, strings.TrimPrefix(r.URL.Path, app.prefix)) && g.engine.Sleeping(id) {
			proxy.WriteError(w, r, wake.Asleep(g.cfg.Wake.RetryAfter))
			return false
		}
		c := g.sessions.Begin(id)
		defer g.sessions.End(c)
		hs, err := g.engine.HomeState(ctx, id)
		running := err == nil && hs.Status == registry.StatusRunning && !hs.Waking
		if _, err := g.engine.EnsureAwake(ctx, id); err != nil {
			if fe, ok := fault.As(err); nav && ok && fe.Code == wake.CodeHomeWaking && r.Context().Err() == nil {
				g.serveWaitingPage(w, r, route)
				return false
			}
			proxy.WriteError(w, r, err)
			return false
		}
		if !running {
			// The home was woken for this request: only an observation of
			// the woken home can publish its route.
			since = time.Now()
		}
	}
	st, _ := g.ap.apps.RefreshSince(ctx, slug, since)
	if g.apPublished(app) {
		return true
	}
	if nav && app.home != nil && ctx.Err() != nil && r.Context().Err() == nil && st.Phase == wake.PhaseStarting {
		g.serveWaitingPage(w, r, route)
		return false
	}
	g.apWriteNotReady(w, r, st)
	return false
}

// apWriteNotReady answers 503 with the app's phase and reason: JSON for API
// callers, a page for browsers.
func (g *Gateway) apWriteNotReady(w http.ResponseWriter, r *http.Request, st wake.AppStatus) {
	msg := fmt.Sprintf("app %s is %s (%s): %s", st.Slug, st.Phase, st.Reason, st.Message)
	proxy.WriteClassified(w, r, proxy.Classified{Status: http.StatusServiceUnavailable, Code: "app_" + string(st.Phase),
		Message: msg, RetryAfter: g.cfg.Wake.RetryAfter,
		Header: http.Header{"X-Wakegate-App-Phase": {string(st.Phase)}, "X-Wakegate-App-Reason": {st.Reason}}})
}

// apWakeStatus answers the waiting page's poll for an app: ready once its
// route is published; meanwhile it keeps the home's wake going and lets an
// observation run.
func (g *Gateway) apWakeStatus(r *http.Request, app *appRoute) map[string]any {
	out := map[string]any{"ready": g.apPublished(app)}
	if out["ready"].(bool) {
		return out
	}
	if h := app.home; h != nil && !g.ap.apps.Stopped(app.cfg.Slug) {
		if h = g.current(h); !g.engine.Warm(h.spec.ID) {
			if err := g.engine.Start(h.spec.ID); err != nil {
				c := proxy.StatusOf(err)
				out["error"], out["code"] = c.Message, c.Code
			}
		}
		if phase, elapsed, ok := g.engine.Progress(h.spec.ID); ok {
			out["phase"], out["elapsed_ms"] = phase, elapsed.Milliseconds()
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), *g.cfg.Wake.Hold)
	defer cancel()
	st, _ := g.ap.apps.Refresh(ctx, app.cfg.Slug, "")
	out["ready"] = g.apPublished(app)
	out["app_phase"], out["app_reason"] = st.Phase, st.Reason
	if _, busy := out["phase"]; !busy && !out["ready"].(bool) {
		out["phase"] = st.Reason
	}
	return out
}

// Apps returns the app observer: statuses, refreshes, waits and the start,
// stop and restart operations (for the admin API).
func (g *Gateway) Apps() *wake.Apps { return g.ap.apps }

// AppRoute is one entry of the route table.
type AppRoute struct {
	Slug  string          `json:"slug"`
	State wake.RouteState `json:"state"`
}

// Routes returns a snapshot of this instance's route table, by slug.
func (g *Gateway) Routes() []AppRoute {
	out := make([]AppRoute, 0, len(g.ap.all()))
	for _, st := range g.ap.apps.List() {
		state := wake.RouteCandidate
		if r := g.ap.route(st.Slug); r != nil && r.published.Load() {
			state = wake.RoutePublished
		}
		out = append(out, AppRoute{Slug: st.Slug, State: state})
	}
	return out
}

// ProbeToken returns this process's internal probe token (for tests that
// prove an outside caller cannot use it).
func (g *Gateway) ProbeToken() string { return g.ap.token }
