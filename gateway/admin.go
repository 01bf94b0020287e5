package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
	"github.com/wakegate/wakegate/web"
)

// The admin listener serves the admin API (/admin/...), /metrics and the
// dashboard (/, /assets/...). It is a listener of its own, never the public
// one. Every request passes, in order:
//
//  1. the Host check: only the listener's own address (and the loopback
//     names on its port, and admin.allowed_hosts) — a DNS-rebinding page
//     names its own host and is refused with 403;
//  2. the cross-site check: an Origin other than the listener's own, or
//     Sec-Fetch-Site: cross-site, is refused with 403;
//  3. the token check (all but the dashboard's static files): a bearer
//     token from admin.tokens, compared in constant time; 401 without or
//     with a wrong one, and 429 with Retry-After once a client IP has
//     failed admin.auth_failures_per_minute times.
type adminServer struct {
	g       *Gateway
	log     *slog.Logger
	tokens  [][sha256.Size]byte // hashes: equal length for the comparison
	allowed map[string]bool     // Host values, lower case
	fails   *admFailures
	handler http.Handler

	srv    *http.Server
	ctx    context.Context // ends every admin request (event streams) at stop
	cancel context.CancelFunc
	done   chan error
}

// startAdmin opens and serves the admin listener when it is configured. It
// returns the function that stops it (safe to call more than once).
func (g *Gateway) startAdmin() (stop func(), err error) {
	c := g.cfg.Admin
	if *c.Listen == "" || len(c.tokens) == 0 {
		if *c.Listen != "" {
			g.log.Info("admin listener off: admin.tokens holds no token")
		}
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", *c.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", *c.Listen, err)
	}
	a := &adminServer{g: g, log: g.log.With("listener", "admin"), allowed: admAllowedHosts(*c.Listen, ln.Addr(), c.AllowedHosts),
		fails: &admFailures{limit: rate.Every(time.Minute / time.Duration(c.AuthFailures)), burst: c.AuthFailures,
			m: map[string]*admFailEntry{}},
		done: make(chan error, 1)}
	for _, t := range c.tokens {
		a.tokens = append(a.tokens, sha256.Sum256([]byte(t)))
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.handler = a.routes()
	a.srv = &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: g.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       g.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    int(g.cfg.Server.MaxHeaderBytes),
		BaseContext:       func(net.Listener) context.Context { return a.ctx },
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	g.admin = a
	g.adminAddr <- ln.Addr()
	g.log.Info("admin listening", "addr", ln.Addr().String())
	go func() { a.done <- a.srv.Serve(ln) }()
	return sync.OnceFunc(a.stop), nil
}

// stop ends event streams, lets other admin requests finish briefly, and
// closes the listener.
func (a *adminServer) stop() {
	a.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	if err := <-a.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Warn("admin serve", "err", err)
	}
}

// AdminAddr returns the admin listener's address once it listens. It waits
// on ctx; an admin listener that is off never answers.
func (g *Gateway) AdminAddr(ctx context.Context) (net.Addr, error) {
	select {
	case a := <-g.adminAddr:
		g.adminAddr <- a
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetVersion sets the version the admin API reports. Call it before Serve.
func (g *Gateway) SetVersion(v string) { g.version = v }

// admAllowedHosts lists the Host values the admin listener answers.
func admAllowedHosts(listen string, bound net.Addr, extra []string) map[string]bool {
	out := map[string]bool{}
	_, port, _ := net.SplitHostPort(bound.String())
	out[strings.ToLower(bound.String())] = true
	host, _, _ := net.SplitHostPort(listen)
	if host != "" {
		out[strings.ToLower(net.JoinHostPort(host, port))] = true
	}
	ip := net.ParseIP(host)
	if host == "" || host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			out[net.JoinHostPort(h, port)] = true
		}
	}
	for _, h := range extra {
		h = strings.ToLower(strings.TrimSpace(h))
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), port)
		}
		out[h] = true
	}
	return out
}

// admFailures rate limits failed token checks per client IP. Entries idle
// for ten minutes are swept once the table grows past admFailSweep.
type admFailures struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	m     map[string]*admFailEntry
}

type admFailEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

const admFailSweep = 4096

func (f *admFailures) entry(ip string) *admFailEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	e := f.m[ip]
	if e == nil {
		if len(f.m) >= admFailSweep {
			for k, v := range f.m {
				if now.Sub(v.seen) > 10*time.Minute {
					delete(f.m, k)
				}
			}
		}
		e = &admFailEntry{lim: rate.NewLimiter(f.limit, f.burst)}
		f.m[ip] = e
	}
	e.seen = now
	return e
}

// blocked reports how long ip must wait before its next attempt (0: it may
// try now).
func (f *admFailures) blocked(ip string) time.Duration {
	f.mu.Lock()
	e := f.m[ip]
	f.mu.Unlock()
	if e == nil {
		return 0
	}
	tok := e.lim.Tokens()
	if tok >= 1 {
		return 0
	}
	return time.Duration((1 - tok) / float64(f.limit) * float64(time.Second))
}

// fail records a failed attempt of ip.
func (f *admFailures) fail(ip string) { f.entry(ip).lim.Allow() }

// routes builds the admin handler.
func (a *adminServer) routes() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		admError(w, http.StatusNotFound, "not_found", "no admin route for this path", "")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		admError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this path", "")
	})
	r.Get("/", a.serveDashboard)
	r.Get("/assets/{file}", a.serveAsset)
	r.Group(func(r chi.Router) {
		r.Use(a.requireToken)
		r.Handle("/metrics", a.g.metrics.handler())
		r.Get("/admin/status", a.serveStatus)
		r.Get("/admin/homes", a.listHomes)
		r.Get("/admin/homes/{id}", a.getHome)
		r.Put("/admin/homes/{id}", a.putHome)
		r.Delete("/admin/homes/{id}", a.deleteHome)
		r.Post("/admin/homes/{id}/wake", a.wakeHome)
		r.Post("/admin/homes/{id}/suspend", a.suspendHome)
		r.Post("/admin/homes/{id}/roll", a.rollHome)
		r.Post("/admin/homes/{id}/leases", a.postLease)
		r.Delete("/admin/homes/{id}/leases/{lease}", a.deleteLease)
		r.Get("/admin/target", a.getTarget)
		r.Put("/admin/target", a.putTarget)
		r.Get("/admin/apps", a.listApps)
		r.Get("/admin/apps/{slug}", a.getApp)
		r.Put("/admin/apps/{slug}", a.putApp)
		r.Delete("/admin/apps/{slug}", a.deleteApp)
		r.Post("/admin/apps/{slug}/refresh", a.refreshApp)
		r.Get("/admin/routes", a.listRoutes)
		r.Get("/admin/events", a.serveEvents)
		r.HandleFunc("/admin/*", func(w http.ResponseWriter, _ *http.Request) {
			admError(w, http.StatusNotFound, "not_found", "no admin route for this path", "")
		})
	})
	return a.guard(r)
}

// guard applies the Host and cross-site checks to every admin request.
func (a *adminServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		if !a.allowed[strings.ToLower(r.Host)] {
			admError(w, http.StatusForbidden, "bad_host", "the admin listener does not answer to host "+strconv.Quote(r.Host), "Host")
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			admError(w, http.StatusForbidden, "cross_site", "cross-site requests are refused", "Sec-Fetch-Site")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "http://"+r.Host) {
			admError(w, http.StatusForbidden, "cross_site", "requests from origin "+strconv.Quote(o)+" are refused", "Origin")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken checks the bearer token in constant time, rate limiting
// failures per client IP.
func (a *adminServer) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		if d := a.fails.blocked(ip); d > 0 {
			a.g.metrics.rateLimited.WithLabelValues("admin_auth").Inc()
			w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			admError(w, http.StatusTooManyRequests, "rate_limited", "too many failed token checks from this address; wait and try again", "")
			return
		}
		if !a.tokenOK(r.Header.Get("Authorization")) {
			a.fails.fail(ip)
			a.g.metrics.authFailures.Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="wakegate-admin"`)
			admError(w, http.StatusUnauthorized, "unauthorized", "a valid admin token is required (Authorization: Bearer TOKEN)", "Authorization")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *adminServer) tokenOK(h string) bool {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for i := range a.tokens {
		match |= subtle.ConstantTimeCompare(sum[:], a.tokens[i][:])
	}
	return match == 1
}

// admError writes the admin API's error body.
func admError(w http.ResponseWriter, status int, code, msg, field string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
}

// admFail maps an error from the engine or the store to an admin answer.
// Errors of a known kind go through fault.Classify; operators see the cause.
func admFail(w http.ResponseWriter, err error) {
	if _, ok := fault.As(err); ok {
		r := fault.Classify(err)
		if s := fault.RetryAfterSeconds(r.RetryAfter); s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		msg := r.Message
		if r.Cause != "" {
			msg += ": " + r.Cause
		}
		if r.Hint != "" {
			msg += " (hint: " + r.Hint + ")"
		}
		admError(w, r.Status, r.Code, msg, r.Field)
		return
	}
	switch {
	case errors.Is(err, registry.ErrConflict):
		admError(w, http.StatusConflict, "conflict", "the record changed since it was read (stale If-Match or a concurrent write): read it again", "If-Match")
	case errors.Is(err, registry.ErrNotFound):
		admError(w, http.StatusNotFound, "not_found", "no such record", "")
	default:
		admError(w, http.StatusInternalServerError, "internal", err.Error(), "")
	}
}

func admJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// admNotImplemented answers routes whose engine API is not in this build.
func admNotImplemented(w http.ResponseWriter, what string) {
	admError(w, http.StatusNotImplemented, "not_implemented", what+" is not available in this build yet", "")
}

// ifMatch reads If-Match: a record generation, quoted or not ("7", W/"7",
// 7); 0 when absent or "*".
func ifMatch(r *http.Request) (uint64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0, nil
	}
	v = strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("want a record generation such as \"7\", got %q", r.Header.Get("If-Match"))
	}
	return n, nil
}

func etag(gen uint64) string { return `"` + strconv.FormatUint(gen, 10) + `"` }

// Status is the answer of GET /admin/status.
type Status struct {
	Instance  string      `json:"instance"`
	Version   string      `json:"version"`
	StartedAt time.Time   `json:"started_at"`
	UptimeS   float64     `json:"uptime_s"`
	Draining  bool        `json:"draining"`
	Healthy   bool        `json:"healthy"`
	Problems  []string    `json:"problems"`
	Counts    StatusCount `json:"counts"`
	// Homes and Apps are filled with ?full=true.
	Homes []HomeView `json:"homes,omitempty"`
	Apps  []AppView  `json:"apps,omitempty"`
}

// StatusCount counts what the gateway serves.
type StatusCount struct {
	Homes        int `json:"homes"`
	HomesRunning int `json:"homes_running"`
	Apps         int `json:"apps"`
	Sessions     int `json:"sessions"`
}

// HomeView is a home as the admin API shows it: no secrets.
type HomeView struct {
	ID          string `json:"id"`
	Target      string `json:"target"`
	Provider    string `json:"provider"`
	Version     string `json:"version"`
	Status      string `json:"status"`
	Verdict     string `json:"verdict"`
	Reason      string `json:"reason,omitempty"`
	WantRunning bool   `json:"want_running"`
	// Endpoint is the upstream base URL without user info or query.
	Endpoint string `json:"endpoint,omitempty"`
	Sessions int    `json:"sessions"`
	// Warm is true while a fresh warm verdict stands.
	Warm bool `json:"warm"`
	// Wake is the wake in flight, if any.
	Wake              *WakeProgress `json:"wake,omitempty"`
	LastWakeAt        *time.Time    `json:"last_wake_at,omitempty"`
	LastWakeLatencyMS float64       `json:"last_wake_latency_ms,omitempty"`
	LastReadyAt       *time.Time    `json:"last_ready_at,omitempty"`
	IdleTimeout       string        `json:"idle_timeout"`
	Probe             string        `json:"probe,omitempty"`
	RelayToken        bool          `json:"relay_token"`
	Generation        uint64        `json:"generation"`
	// Dynamic is true for a home registered through the admin API (it is
	// registered again when the gateway restarts).
	Dynamic bool `json:"dynamic,omitempty"`
	// Restarts are the exec supervisor's last restarts of the home's
	// process, oldest first (only in the answers about one home; omitted
	// when there were none since the gateway started).
	Restarts []provider.Restart `json:"restarts,omitempty"`
}

// WakeProgress is a wake in flight.
type WakeProgress struct {
	Phase     string `json:"phase"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// AppView is an app as the admin API shows it: its config and its last
// observed status.
type AppView struct {
	Slug     string `json:"slug"`
	Kind     string `json:"kind"`
	Home     string `json:"home,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	// Phase, Reason and Message are the app's last observed phase, its
	// reason code and a sentence for people.
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Route is the app's route state here: candidate or published.
	Route       string     `json:"route"`
	ObservedAt  *time.Time `json:"observed_at,omitempty"`
	ProbeStatus int        `json:"probe_status,omitempty"`
	Operation   string     `json:"operation,omitempty"`
	Stale       bool       `json:"stale,omitempty"`
	// Source is "config" for an app of the config file and "api" for one
	// registered through PUT /admin/apps/{slug}; Generation is the latter's
	// stored generation (its ETag), 0 for the former.
	Source     string `json:"source"`
	Generation uint64 `json:"generation,omitempty"`
}

func (a *adminServer) homeView(h *homeRoute, rec registry.Home) HomeView {
	g := a.g
	v := HomeView{ID: h.spec.ID, Target: h.spec.Target, Provider: rec.Provider, Version: rec.Version,
		Status: string(rec.Status), Verdict: string(rec.Verdict), Reason: rec.Reason, WantRunning: rec.WantRunning,
		Endpoint: admSafeURL(rec.Endpoint), Sessions: g.sessions.Count(h.spec.ID), Warm: g.engine.Warm(h.spec.ID),
		IdleTimeout: h.spec.IdleTimeout.String(), Probe: string(h.spec.Probe), RelayToken: h.token != "",
		Generation: rec.Generation, Dynamic: rec.Dynamic}
	if v.Verdict == "" {
		v.Verdict = "none"
	}
	if phase, el, ok := g.engine.Progress(h.spec.ID); ok {
		v.Wake = &WakeProgress{Phase: phase, ElapsedMS: el.Milliseconds()}
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
	return v
}

// admSafeURL drops user info, query and fragment from an endpoint.
func admSafeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func (a *adminServer) homes(ctx context.Context) ([]HomeView, error) {
	recs, err := a.g.store.ListHomes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list homes: %w", err)
	}
	byID := map[string]registry.Home{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	tab := a.g.homeTab.Load()
	out := make([]HomeView, 0, len(tab.byID))
	for id, h := range tab.byID {
		rec, ok := byID[id]
		if !ok {
			rec = registry.Home{ID: id, Provider: h.spec.Provider, Version: h.spec.Version, Status: registry.StatusUnknown}
		}
		out = append(out, a.homeView(h, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (a *adminServer) apps() []AppView {
	routes := a.g.ap.all()
	out := make([]AppView, 0, len(routes))
	for _, r := range routes {
		ar := r.app
		st, _ := a.g.Apps().Status(ar.cfg.Slug)
		out = append(out, a.appView(ar, st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

func (a *adminServer) appView(ar *appRoute, st wake.AppStatus) AppView {
	v := AppView{Slug: ar.cfg.Slug, Kind: ar.cfg.Kind, Home: ar.cfg.Home, Upstream: admSafeURL(ar.cfg.Upstream),
		Phase: string(st.Phase), Reason: st.Reason, Message: st.Message, Route: string(st.Route),
		ProbeStatus: st.ProbeStatus, Operation: st.Operation, Stale: st.Stale, Source: "config"}
	if r := a.g.ap.route(ar.cfg.Slug); r != nil && r.app == ar && r.gen != 0 {
		v.Source, v.Generation = "api", r.gen
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

func (a *adminServer) status(ctx context.Context, full bool) (Status, error) {
	g := a.g
	homes, err := a.homes(ctx)
	if err != nil {
		return Status{}, err
	}
	apps := a.apps()
	s := Status{Instance: g.cfg.Instance, Version: g.version, StartedAt: g.started.UTC(),
		UptimeS: time.Since(g.started).Round(time.Millisecond).Seconds(), Draining: g.draining.Load(), Problems: []string{},
		Counts: StatusCount{Homes: len(homes), Apps: len(apps)}}
	for _, h := range homes {
		s.Counts.Sessions += h.Sessions
		switch registry.Status(h.Status) {
		case registry.StatusRunning:
			s.Counts.HomesRunning++
		case registry.StatusFailed, registry.StatusUnknown:
			s.Problems = append(s.Problems, fmt.Sprintf("home %s is %s: %s", h.ID, h.Status, h.Reason))
		}
		if h.Verdict == string(registry.VerdictDegraded) {
			s.Problems = append(s.Problems, fmt.Sprintf("home %s is degraded", h.ID))
		}
	}
	for _, ap := range apps {
		if ap.Phase == string(wake.PhaseFailed) {
			s.Problems = append(s.Problems, fmt.Sprintf("app %s is failed: %s", ap.Slug, ap.Message))
		}
	}
	if s.Draining {
		s.Problems = append(s.Problems, "the gateway is draining")
	}
	s.Healthy = len(s.Problems) == 0
	if full {
		s.Homes, s.Apps = homes, apps
	}
	return s, nil
}

func (a *adminServer) serveStatus(w http.ResponseWriter, r *http.Request) {
	full := r.URL.Query().Get("full")
	s, err := a.status(r.Context(), full == "true" || full == "1")
	if err != nil {
		admFail(w, err)
		return
	}
	admJSON(w, http.StatusOK, s)
}

func (a *adminServer) listHomes(w http.ResponseWriter, r *http.Request) {
	hs, err := a.homes(r.Context())
	if err != nil {
		admFail(w, err)
		return
	}
	admJSON(w, http.StatusOK, map[string]any{"homes": hs})
}

// lookup finds the home named in the path, answering 404 when there is none.
func (a *adminServer) lookup(w http.ResponseWriter, r *http.Request) (*homeRoute, bool) {
	id := chi.URLParam(r, "id")
	h, ok := a.g.homeWithID(id)
	if !ok {
		admError(w, http.StatusNotFound, "home_not_found", "no home with id "+strconv.Quote(id), "id")
	}
	return h, ok
}

func (a *adminServer) writeHome(w http.ResponseWriter, r *http.Request, status int, h *homeRoute) {
	rec, err := a.g.store.GetHome(r.Context(), h.spec.ID)
	if err != nil {
		admFail(w, err)
		return
	}
	w.Header().Set("ETag", etag(rec.Generation))
	v := a.homeView(h, rec)
	if h.spec.Provider == "exec" {
		v.Restarts = a.g.exec.History(h.spec.ID)
	}
	admJSON(w, status, v)
}

func (a *adminServer) getHome(w http.ResponseWriter, r *http.Request) {
	if h, ok := a.lookup(w, r); ok {
		a.writeHome(w, r, http.StatusOK, h)
	}
}

// HomeRequest is the body of PUT /admin/homes/{id}.
type HomeRequest struct {
	// Target is the name in /node/{target}. Default: the id.
	Target string `json:"target"`
	// Provider is "exec" (default). Static homes are declared in the config.
	Provider string `json:"provider"`
	// Version is the version a new home first runs. Default "1". A
	// replaced home keeps its stored version (a roll changes versions).
	Version string `json:"version"`
	// RelayToken is a secret reference, env:NAME or file:PATH.
	RelayToken string `json:"relay_token"`
	// IdleTimeout is a duration such as "5m"; default wake.idle_timeout;
	// "0s" never suspends.
	IdleTimeout *string `json:"idle_timeout"`
	// Probe is "ws", "http" or "tcp"; default wake.probe.kind.
	Probe string `json:"probe"`
}

type admFieldErr struct{ field, msg string }

func (a *adminServer) putHome(w http.ResponseWriter, r *http.Request) {
	g := a.g
	id := chi.URLParam(r, "id")
	gen, err := ifMatch(r)
	if err != nil {
		admError(w, http.StatusBadRequest, "bad_if_match", err.Error(), "If-Match")
		return
	}
	var req HomeRequest
	if field, err := admDecode(r, &req); err != nil {
		admError(w, http.StatusBadRequest, "bad_request", err.Error(), field)
		return
	}
	spec, token, errs := a.validateHome(id, req)
	if len(errs) > 0 {
		admFieldErrors(w, errs)
		return
	}
	// A home the config does not declare is dynamic: stored with what its
	// registration needs, and registered again at start (homes_runtime.go).
	dyn := !g.rtConfigHome(id)
	ctx := r.Context()
	cur, err := g.store.GetHome(ctx, id)
	created := false
	switch {
	case errors.Is(err, registry.ErrNotFound):
		if gen != 0 {
			admError(w, http.StatusConflict, "conflict", "If-Match names a generation but the home does not exist", "If-Match")
			return
		}
		created = true
		_, err = g.store.PutHome(ctx, registry.Home{ID: id, Target: spec.Target, Provider: spec.Provider,
			Version: spec.Version, RelayTokenRef: req.RelayToken, Status: registry.StatusSleeping, Owner: g.cfg.Instance,
			Dynamic: dyn, IdleTimeout: spec.IdleTimeout, Probe: string(spec.Probe)}, registry.Cond{})
	case err != nil:
	case gen != 0 && cur.Generation != gen:
		admError(w, http.StatusConflict, "conflict", fmt.Sprintf("If-Match %d is stale: the home is at generation %d", gen, cur.Generation), "If-Match")
		return
	default:
		if _, known := g.homeWithID(id); !known && !cur.Dynamic {
			admError(w, http.StatusConflict, "conflict", "a stored home with this id exists but is not served here; remove it first", "id")
			return
		}
		spec.Version = cur.Version
		next := cur
		next.Target, next.Provider, next.RelayTokenRef, next.Owner = spec.Target, spec.Provider, req.RelayToken, g.cfg.Instance
		next.Dynamic, next.IdleTimeout, next.Probe = dyn, spec.IdleTimeout, string(spec.Probe)
		_, err = g.store.PutHome(ctx, next, registry.CondOf(cur))
	}
	if err != nil {
		admFail(w, err)
		return
	}
	if err := g.engine.Register(ctx, spec); err != nil {
		admFail(w, err)
		return
	}
	hr := &homeRoute{spec: spec, token: token}
	g.setHome(id, hr)
	a.log.Info("home registered", "home", id, "target", spec.Target, "created", created)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	a.writeHome(w, r, status, hr)
}

// validateHome checks a PUT body and names every bad field.
func (a *adminServer) validateHome(id string, req HomeRequest) (wake.HomeSpec, string, []admFieldErr) {
	g := a.g
	var errs []admFieldErr
	bad := func(f, format string, args ...any) { errs = append(errs, admFieldErr{f, fmt.Sprintf(format, args...)}) }
	if !idRE.MatchString(id) {
		bad("id", "want 1-63 of [a-z0-9._-] starting with a letter or digit, got %q", id)
	}
	spec := wake.HomeSpec{ID: id, Target: req.Target, Provider: req.Provider, Version: req.Version,
		IdleTimeout: *g.cfg.Wake.IdleTimeout, Probe: wake.ProbeKind(req.Probe)}
	if spec.Target == "" {
		spec.Target = id
	}
	if spec.Provider == "" {
		spec.Provider = "exec"
	}
	if spec.Version == "" {
		spec.Version = "1"
	}
	if spec.Probe == "" {
		spec.Probe = wake.ProbeKind(g.cfg.Wake.Probe.Kind)
	}
	if !registry.ValidSlug(spec.Target) {
		bad("target", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", spec.Target)
	} else if other, ok := g.homeAt(spec.Target); ok && other.spec.ID != id {
		bad("target", "target %q is taken by home %s", spec.Target, other.spec.ID)
	}
	switch spec.Provider {
	case "exec":
	case "static":
		bad("provider", "static homes have a fixed endpoint and are declared in the config file")
	default:
		bad("provider", "unknown provider %q (want exec)", spec.Provider)
	}
	switch spec.Probe {
	case wake.ProbeWS, wake.ProbeHTTP, wake.ProbeTCP:
	default:
		bad("probe", "want ws, http or tcp, got %q", req.Probe)
	}
	if len(spec.Version) > 128 {
		bad("version", "at most 128 characters")
	}
	token := ""
	if req.RelayToken != "" {
		t, err := ResolveSecret(req.RelayToken)
		if err != nil {
			bad("relay_token", "%v", err)
		}
		token = t
		spec.RelayToken = t
	}
	if req.IdleTimeout != nil {
		d, err := time.ParseDuration(*req.IdleTimeout)
		switch {
		case err != nil:
			bad("idle_timeout", "want a duration such as 5m, got %q", *req.IdleTimeout)
		case d < 0:
			bad("idle_timeout", "must not be negative")
		default:
			spec.IdleTimeout = d
		}
	}
	return spec, token, errs
}

// admDecode reads a JSON body of at most 64 KiB with no unknown fields; on
// error it returns the field at fault when it can tell.
func admDecode(r *http.Request, v any) (string, error) {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Type == reflect.TypeFor[registry.Duration]() {
			return te.Field, fmt.Errorf("%s: want a duration such as 2s, got %s", te.Field, te.Value)
		}
		if errors.As(err, &te) {
			return te.Field, fmt.Errorf("%s: want a %s", te.Field, te.Type)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			return f, fmt.Errorf("%s: unknown field", f)
		}
		return "body", fmt.Errorf("body: want a JSON object: %w", err)
	}
	return "", nil
}

func (a *adminServer) deleteHome(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	gen, err := ifMatch(r)
	if err != nil {
		admError(w, http.StatusBadRequest, "bad_if_match", err.Error(), "If-Match")
		return
	}
	id := h.spec.ID
	for _, r := range a.g.ap.all() {
		if ar := r.app; ar.home != nil && ar.home.spec.ID == id {
			admError(w, http.StatusConflict, "home_in_use", "app "+ar.cfg.Slug+" runs in this home", "id")
			return
		}
	}
	// Off the route table first, so no new request starts on it.
	a.g.setHome(id, nil)
	if err := a.g.engine.Remove(r.Context(), id, gen); err != nil {
		a.g.setHome(id, h)
		admFail(w, err)
		return
	}
	a.log.Info("home removed", "home", id)
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) wakeHome(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("wait") == "false" {
		if err := a.g.engine.Start(h.spec.ID); err != nil {
			admFail(w, err)
			return
		}
		a.writeHome(w, r, http.StatusAccepted, h)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.g.cfg.Wake.WakeTimeout)
	defer cancel()
	if _, err := a.g.engine.WakeNow(ctx, h.spec.ID, "admin"); err != nil {
		admFail(w, err)
		return
	}
	a.writeHome(w, r, http.StatusOK, h)
}

func (a *adminServer) suspendHome(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	if err := a.g.engine.Suspend(r.Context(), h.spec.ID); err != nil {
		admFail(w, err)
		return
	}
	a.writeHome(w, r, http.StatusOK, h)
}

func (a *adminServer) rollHome(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.g.cfg.Wake.WakeTimeout)
	defer cancel()
	if _, err := a.g.engine.Roll(ctx, h.spec.ID); err != nil {
		admFail(w, err)
		return
	}
	a.writeHome(w, r, http.StatusOK, h)
}

// TargetRequest is the body of PUT /admin/target.
type TargetRequest struct {
	// Version is the version homes roll onto. Required.
	Version string `json:"version"`
	// Image is what image-based providers run the version from.
	Image string `json:"image"`
	// Command is the exec provider's command template for the version;
	// empty for the provider's default.
	Command []string `json:"command"`
}

func (a *adminServer) getTarget(w http.ResponseWriter, r *http.Request) {
	t, err := a.g.engine.Target(r.Context())
	if errors.Is(err, registry.ErrNotFound) {
		admError(w, http.StatusNotFound, "no_target", "no roll target is registered", "")
		return
	}
	if err != nil {
		admFail(w, err)
		return
	}
	w.Header().Set("ETag", etag(t.Generation))
	admJSON(w, http.StatusOK, t)
}

// putTarget registers the roll target. If-Match, when given, must be the
// stored target's generation; the engine then writes with its own
// compare-and-set.
func (a *adminServer) putTarget(w http.ResponseWriter, r *http.Request) {
	gen, err := ifMatch(r)
	if err != nil {
		admError(w, http.StatusBadRequest, "bad_if_match", err.Error(), "If-Match")
		return
	}
	var req TargetRequest
	if field, err := admDecode(r, &req); err != nil {
		admError(w, http.StatusBadRequest, "bad_request", err.Error(), field)
		return
	}
	switch {
	case strings.TrimSpace(req.Version) == "" || len(req.Version) > 128:
		admError(w, http.StatusBadRequest, "invalid", "version: required, at most 128 characters", "version")
		return
	case len(req.Command) > 0 && req.Command[0] == "":
		admError(w, http.StatusBadRequest, "invalid", "command: the first element must name a program", "command")
		return
	}
	if gen != 0 {
		cur, err := a.g.engine.Target(r.Context())
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			admFail(w, err)
			return
		}
		if cur.Generation != gen {
			admError(w, http.StatusConflict, "conflict", fmt.Sprintf("If-Match %d is stale: the target is at generation %d", gen, cur.Generation), "If-Match")
			return
		}
	}
	t, err := a.g.engine.SetTarget(r.Context(), registry.Target{Version: req.Version, Image: req.Image, Command: req.Command})
	if err != nil {
		admFail(w, err)
		return
	}
	a.log.Info("roll target set", "version", t.Version)
	w.Header().Set("ETag", etag(t.Generation))
	admJSON(w, http.StatusOK, t)
}

func (a *adminServer) listApps(w http.ResponseWriter, _ *http.Request) {
	admJSON(w, http.StatusOK, map[string]any{"apps": a.apps()})
}

// app finds the app named in the path, answering 404 when there is none.
func (a *adminServer) app(w http.ResponseWriter, r *http.Request) (*appRoute, bool) {
	slug := chi.URLParam(r, "slug")
	ar, ok := a.g.appBySlug(slug)
	if !ok {
		admError(w, http.StatusNotFound, "app_not_found", "no app with slug "+strconv.Quote(slug), "slug")
	}
	return ar, ok
}

func (a *adminServer) getApp(w http.ResponseWriter, r *http.Request) {
	if ar, ok := a.app(w, r); ok {
		st, _ := a.g.Apps().Status(ar.cfg.Slug)
		v := a.appView(ar, st)
		if v.Generation != 0 {
			w.Header().Set("ETag", etag(v.Generation))
		}
		admJSON(w, http.StatusOK, v)
	}
}

// refreshApp observes an app now (sharing an observation in flight) and,
// with ?wait=PHASE, waits for that phase up to the engine's budget.
func (a *adminServer) refreshApp(w http.ResponseWriter, r *http.Request) {
	ar, ok := a.app(w, r)
	if !ok {
		return
	}
	wait := wake.Phase(r.URL.Query().Get("wait"))
	switch wait {
	case "", wake.PhaseReady, wake.PhaseStopped, wake.PhaseStarting, wake.PhaseFailed:
	default:
		admError(w, http.StatusBadRequest, "invalid", "wait: want ready, stopped, starting or failed, got "+strconv.Quote(string(wait)), "wait")
		return
	}
	st, err := a.g.Apps().Refresh(r.Context(), ar.cfg.Slug, wait)
	if err != nil && st.Slug == "" {
		if errors.Is(err, wake.ErrNoApp) {
			admError(w, http.StatusNotFound, "app_not_found", err.Error(), "slug")
			return
		}
		admFail(w, err)
		return
	}
	status := http.StatusOK
	if errors.Is(err, context.DeadlineExceeded) {
		// The wait ran out: the last status, with 504. (A failed app is
		// answered with 200 and its failed phase.)
		status = http.StatusGatewayTimeout
	}
	admJSON(w, status, a.appView(ar, st))
}

func (a *adminServer) listRoutes(w http.ResponseWriter, _ *http.Request) {
	admJSON(w, http.StatusOK, map[string]any{"routes": a.g.Routes()})
}

// LeaseRequest is the body of POST /admin/homes/{id}/leases.
type LeaseRequest struct {
	// TTL is how long the lease keeps the home in session, e.g. "10m";
	// between 1s and 24h.
	TTL string `json:"ttl"`
}

func (a *adminServer) postLease(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	var req LeaseRequest
	if field, err := admDecode(r, &req); err != nil {
		admError(w, http.StatusBadRequest, "bad_request", err.Error(), field)
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < time.Second || ttl > 24*time.Hour {
		admError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("ttl: want a duration between 1s and 24h, got %q", req.TTL), "ttl")
		return
	}
	id := a.g.sessions.Lease(h.spec.ID, ttl)
	admJSON(w, http.StatusCreated, map[string]any{"home": h.spec.ID, "lease": strconv.FormatUint(id, 10),
		"expires_at": time.Now().Add(ttl).UTC()})
}

func (a *adminServer) deleteLease(w http.ResponseWriter, r *http.Request) {
	h, ok := a.lookup(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseUint(chi.URLParam(r, "lease"), 10, 64)
	if err != nil {
		admError(w, http.StatusBadRequest, "invalid", "lease: want a lease id", "lease")
		return
	}
	if !a.g.sessions.EndLease(h.spec.ID, id) {
		admError(w, http.StatusNotFound, "lease_not_found", "no live lease with this id on the home", "lease")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveEvents streams the engine's events as Server-Sent Events: first the
// remembered ones after Last-Event-ID (all of them without it), then each
// new event the moment it is published. A comment line every 15 s keeps
// proxies from closing an idle stream. The stream ends with the request or
// when the admin listener stops.
func (a *adminServer) serveEvents(w http.ResponseWriter, r *http.Request) {
	bus := a.g.engine.Events()
	if bus == nil {
		admNotImplemented(w, "the event stream")
		return
	}
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			admError(w, http.StatusBadRequest, "invalid", "Last-Event-ID: want an event id", "Last-Event-ID")
			return
		}
		after = n
	}
	rc := http.NewResponseController(w)
	sub := bus.Subscribe(256)
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev wake.Event) error {
		if ev.Seq <= after {
			return nil
		}
		after = ev.Seq
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b); err != nil {
			return fmt.Errorf("write event: %w", err)
		}
		return nil
	}
	for _, ev := range bus.Recent() {
		if err := send(ev); err != nil {
			return
		}
	}
	if _, err := fmt.Fprint(w, ": stream open\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		case ev := <-sub.C:
			if err := send(ev); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func (a *adminServer) serveDashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", web.DashboardCSP)
	_, _ = w.Write(web.Dashboard())
}

func (a *adminServer) serveAsset(w http.ResponseWriter, r *http.Request) {
	body, ctype, ok := web.DashboardAsset(chi.URLParam(r, "file"))
	if !ok {
		admError(w, http.StatusNotFound, "not_found", "no such asset", "")
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(body)
}
