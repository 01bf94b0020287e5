package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// Apps registered at runtime. PUT /admin/apps/{slug} registers or replaces
// an app and DELETE removes it. Such an app is held to the config's rules
// (appcheck.go), stored in the registry (so a restarted gateway registers
// it again) and carries the stored record's generation, which If-Match
// names. It joins the route table as a candidate, exactly like an app of
// the config at start: its observation loop runs under the same owner as
// the others (Serve's background work), and only its self-probe publishes
// it. Apps of the config are changed in the config, not here; a stored app
// whose slug the config declares is ignored at start (the config wins).
//
// The route table is copy on write: the request path loads it with one
// atomic read; registrations and removals are serialised by apState.change
// and publish a changed copy.

// route returns slug's entry in the route table, or nil.
func (s *apState) route(slug string) *apRoute { return (*s.routes.Load())[slug] }

// all returns the route table (never to be changed).
func (s *apState) all() map[string]*apRoute { return *s.routes.Load() }

// setRoute publishes a table with r at slug (nil r removes slug); the
// caller holds s.change.
func (s *apState) setRoute(slug string, r *apRoute) {
	m := maps.Clone(*s.routes.Load())
	if r == nil {
		delete(m, slug)
	} else {
		m[slug] = r
	}
	s.routes.Store(&m)
}

// appBySlug returns the app routed at /apps/{slug}.
func (g *Gateway) appBySlug(slug string) (*appRoute, bool) {
	if r := g.ap.route(slug); r != nil {
		return r.app, true
	}
	return nil, false
}

// rtLoops owns the observation loops of apps, one per slug. Serve's
// background context is their owner: run starts a loop for every app and
// returns once they all ended; start and stop add and end loops of apps
// registered and removed meanwhile.
type rtLoops struct {
	mu    sync.Mutex
	ctx   context.Context // the owner's; nil before run and after the owner is done
	fn    func(ctx context.Context, slug string, every time.Duration)
	loops map[string]*rtLoop
	wg    sync.WaitGroup
}

type rtLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// run starts fn for every app of table() (read under the lock, so that an
// app registered concurrently gets exactly one loop), waits for ctx, and
// then for every loop to end.
func (l *rtLoops) run(ctx context.Context, table func() map[string]*apRoute, fn func(context.Context, string, time.Duration)) {
	l.mu.Lock()
	l.ctx, l.fn, l.loops = ctx, fn, map[string]*rtLoop{}
	for slug, r := range table() {
		l.startLocked(slug, r.app.cfg.Health.Interval)
	}
	l.mu.Unlock()
	<-ctx.Done()
	l.mu.Lock()
	l.ctx = nil
	l.mu.Unlock()
	l.wg.Wait()
}

// start starts slug's loop unless it runs or the owner is not running (run
// starts it later, or the gateway is stopping).
func (l *rtLoops) start(slug string, every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startLocked(slug, every)
}

func (l *rtLoops) startLocked(slug string, every time.Duration) {
	if l.ctx == nil || l.ctx.Err() != nil || l.loops[slug] != nil {
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	lp := &rtLoop{cancel: cancel, done: make(chan struct{})}
	l.loops[slug] = lp
	fn := l.fn
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(lp.done)
		fn(ctx, slug, every)
	}()
}

// stop ends slug's loop, if any, and waits until it has returned.
func (l *rtLoops) stop(slug string) {
	l.mu.Lock()
	lp := l.loops[slug]
	delete(l.loops, slug)
	l.mu.Unlock()
	if lp != nil {
		lp.cancel()
		<-lp.done
	}
}

// rtAppSpec is what the app observer needs of ac.
func (g *Gateway) rtAppSpec(ac AppConfig) wake.AppSpec {
	s := wake.AppSpec{Slug: ac.Slug, API: ac.Kind == "api", Home: ac.Home, Upstream: ac.Upstream, Path: ac.Path,
		Health: wake.AppHealth{Type: ac.Health.Type, Path: ac.Health.Path, Interval: ac.Health.Interval,
			Timeout: ac.Health.Timeout, StartPeriod: ac.Health.StartPeriod},
		Stopped: ac.DesiredState == "stopped", FailureThreshold: ac.FailureThreshold,
		MinRefresh: ac.MinRefresh, RefreshTimeout: ac.RefreshTimeout}
	if h, ok := g.homeWithID(ac.Home); ok && h.token != "" {
		s.Header = http.Header{g.cfg.Proxy.RelayHeader: {h.token}}
	}
	return s
}

// rtInstall puts ac into the route table as a candidate with generation
// gen, in place of any app with its slug, registers it with the observer
// and starts its loop. The caller holds g.ap.change and has checked ac.
func (g *Gateway) rtInstall(ac AppConfig, gen uint64) {
	slug := ac.Slug
	g.ap.loops.stop(slug)
	(*apTable)(g).Withdraw(slug, "replaced")
	ar := &appRoute{cfg: ac, prefix: "/apps/" + slug}
	if ac.Upstream != "" {
		ar.upstream, _ = url.Parse(ac.Upstream) // checked by rtCheckApp
	} else {
		ar.home, _ = g.homeWithID(ac.Home)
	}
	g.ap.setRoute(slug, &apRoute{app: ar, gen: gen})
	g.ap.apps.Put(g.rtAppSpec(ac))
	g.ap.loops.start(slug, ac.Health.Interval)
}

// rtUninstall ends slug's loop, unpublishes and removes its route and
// stops observing it; the caller holds g.ap.change. Once it returns, no
// health check or self-probe of the app runs.
func (g *Gateway) rtUninstall(slug string) {
	g.ap.loops.stop(slug)
	(*apTable)(g).Withdraw(slug, "removed")
	g.ap.setRoute(slug, nil)
	g.ap.apps.Remove(slug)
}

// rtRecord is the stored form of ac.
func rtRecord(ac AppConfig) registry.App {
	h := ac.Health
	return registry.App{Slug: ac.Slug, Upstream: ac.Upstream, Home: ac.Home, Kind: ac.Kind, StripPrefix: ac.StripPrefix,
		Path: ac.Path, DesiredState: ac.DesiredState, FailureThreshold: ac.FailureThreshold,
		MinRefresh: ac.MinRefresh, RefreshTimeout: ac.RefreshTimeout,
		Health: registry.AppHealth{Type: h.Type, Path: h.Path, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod}}
}

// rtConfigOf is the app a stored record declares, with defaults filled.
func rtConfigOf(rec registry.App) AppConfig {
	h := rec.Health
	ac := AppConfig{Slug: rec.Slug, Upstream: rec.Upstream, Home: rec.Home, Kind: rec.Kind, StripPrefix: rec.StripPrefix,
		Path: rec.Path, DesiredState: rec.DesiredState, FailureThreshold: rec.FailureThreshold,
		MinRefresh: rec.MinRefresh, RefreshTimeout: rec.RefreshTimeout,
		Health: AppHealthConfig{Type: h.Type, Path: h.Path, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod}}
	rtAppDefaults(&ac)
	return ac
}

// rtConfigApp reports whether the config declares slug.
func (g *Gateway) rtConfigApp(slug string) bool {
	for _, ac := range g.cfg.Apps {
		if ac.Slug == slug {
			return true
		}
	}
	return false
}

// rtRestoreApps registers the apps stored through the admin API again, at
// start, after every home. An app the config also declares, or whose
// record no longer passes the checks (its home is gone), is skipped with a
// warning; its record is kept.
func (g *Gateway) rtRestoreApps(ctx context.Context) error {
	recs, err := g.store.ListApps(ctx)
	if err != nil {
		return fmt.Errorf("restore apps: %w", err)
	}
	g.ap.change.Lock()
	defer g.ap.change.Unlock()
	for _, rec := range recs {
		if g.rtConfigApp(rec.Slug) {
			g.log.Warn("stored app not restored: the config declares the same slug, and the config wins", "app", rec.Slug)
			continue
		}
		ac := rtConfigOf(rec)
		var problems []string
		rtCheckApp(ac, func(id string) bool { _, ok := g.homeWithID(id); return ok }, func(field, format string, args ...any) {
			problems = append(problems, field+": "+fmt.Sprintf(format, args...))
		})
		if len(problems) > 0 {
			g.log.Warn("stored app not restored", "app", rec.Slug, "problems", problems)
			continue
		}
		g.rtInstall(ac, rec.Generation)
		g.log.Info("app restored", "app", rec.Slug, "generation", rec.Generation)
	}
	return nil
}

// AppRequest is the body of PUT /admin/apps/{slug}: the fields of an app in
// the config (see AppConfig for each one's default), with durations as
// strings such as "2s".
type AppRequest struct {
	Upstream     string            `json:"upstream"`
	Home         string            `json:"home"`
	Kind         string            `json:"kind"`
	StripPrefix  bool              `json:"strip_prefix"`
	Path         string            `json:"path"`
	Health       *AppHealthRequest `json:"health"`
	DesiredState string            `json:"desired_state"`
	// FailureThreshold is an observation count; 0 means the default (3).
	FailureThreshold int    `json:"failure_threshold"`
	MinRefresh       string `json:"min_refresh"`
	RefreshTimeout   string `json:"refresh_timeout"`
}

// AppHealthRequest is the health check of an AppRequest.
type AppHealthRequest struct {
	Type        string `json:"type"`
	Path        string `json:"path"`
	Interval    string `json:"interval"`
	Timeout     string `json:"timeout"`
	StartPeriod string `json:"start_period"`
}

// rtAppFromRequest turns a PUT body into a checked app config, naming every
// bad field.
func (a *adminServer) rtAppFromRequest(slug string, req AppRequest) (AppConfig, []admFieldErr) {
	var errs []admFieldErr
	bad := func(f, format string, args ...any) { errs = append(errs, admFieldErr{f, fmt.Sprintf(format, args...)}) }
	dur := func(field, v string, out *time.Duration) {
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			bad(field, "want a duration such as 2s, got %q", v)
			return
		}
		*out = d
	}
	ac := AppConfig{Slug: slug, Upstream: req.Upstream, Home: req.Home, Kind: req.Kind, StripPrefix: req.StripPrefix,
		Path: req.Path, DesiredState: req.DesiredState, FailureThreshold: req.FailureThreshold}
	dur("min_refresh", req.MinRefresh, &ac.MinRefresh)
	dur("refresh_timeout", req.RefreshTimeout, &ac.RefreshTimeout)
	if h := req.Health; h != nil {
		ac.Health.Type, ac.Health.Path = h.Type, h.Path
		dur("health.interval", h.Interval, &ac.Health.Interval)
		dur("health.timeout", h.Timeout, &ac.Health.Timeout)
		dur("health.start_period", h.StartPeriod, &ac.Health.StartPeriod)
	}
	if req.FailureThreshold < 0 {
		bad("failure_threshold", "must be at least 1, got %d", req.FailureThreshold)
		ac.FailureThreshold = 1 // reported once
	}
	rtAppDefaults(&ac)
	rtCheckApp(ac, func(id string) bool { _, ok := a.g.homeWithID(id); return ok }, bad)
	return ac, errs
}

// admFieldErrors answers 400 naming every bad field: error.field lists
// them (comma separated), error.fields has one entry per field.
func admFieldErrors(w http.ResponseWriter, errs []admFieldErr) {
	msgs := make([]string, len(errs))
	fields := make([]string, len(errs))
	list := make([]map[string]string, len(errs))
	for i, e := range errs {
		msgs[i], fields[i] = e.field+": "+e.msg, e.field
		list[i] = map[string]string{"field": e.field, "message": e.msg}
	}
	admJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "invalid",
		"message": strings.Join(msgs, "; "), "field": strings.Join(fields, ","), "fields": list}})
}

// putApp registers or replaces an app. If-Match, when given, must be the
// app's generation (its ETag). 201 for a new app, 200 for a replaced one;
// either way the app is a candidate until its self-probe passes.
func (a *adminServer) putApp(w http.ResponseWriter, r *http.Request) {
	g := a.g
	slug := chi.URLParam(r, "slug")
	gen, err := ifMatch(r)
	if err != nil {
		admError(w, http.StatusBadRequest, "bad_if_match", err.Error(), "If-Match")
		return
	}
	var req AppRequest
	if field, err := admDecode(r, &req); err != nil {
		admError(w, http.StatusBadRequest, "bad_request", err.Error(), field)
		return
	}
	ac, errs := a.rtAppFromRequest(slug, req)
	if len(errs) > 0 {
		admFieldErrors(w, errs)
		return
	}
	g.ap.change.Lock()
	defer g.ap.change.Unlock()
	cur := g.ap.route(slug)
	switch {
	case cur != nil && cur.gen == 0:
		admError(w, http.StatusConflict, "config_app", "app "+strconv.Quote(slug)+" is declared in the config file; change it there", "slug")
		return
	case gen != 0 && cur == nil:
		admError(w, http.StatusConflict, "conflict", "If-Match names a generation but the app does not exist", "If-Match")
		return
	case gen != 0 && cur.gen != gen:
		admError(w, http.StatusConflict, "conflict", fmt.Sprintf("If-Match %d is stale: the app is at generation %d", gen, cur.gen), "If-Match")
		return
	}
	ctx := r.Context()
	rec := rtRecord(ac)
	rec.Owner, rec.UpdatedAt = g.cfg.Instance, time.Now().UTC()
	prev, err := g.store.GetApp(ctx, slug)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		if cur != nil {
			// Served here but gone from the store: another writer removed it.
			admError(w, http.StatusConflict, "conflict", "the stored app was removed meanwhile; read it again", "If-Match")
			return
		}
		rec, err = g.store.PutApp(ctx, rec, registry.Cond{})
	case err != nil:
	case cur != nil && prev.Generation != cur.gen:
		admError(w, http.StatusConflict, "conflict", fmt.Sprintf("the stored app is at generation %d, this gateway serves %d; read it again", prev.Generation, cur.gen), "If-Match")
		return
	default:
		// A stored app not served here (skipped at start) is replaced too.
		rec, err = g.store.PutApp(ctx, rec, registry.AppCond(prev))
	}
	if err != nil {
		admFail(w, err)
		return
	}
	g.rtInstall(ac, rec.Generation)
	a.log.Info("app registered", "app", slug, "generation", rec.Generation, "replaced", cur != nil)
	status := http.StatusCreated
	if cur != nil {
		status = http.StatusOK
	}
	ar, _ := g.appBySlug(slug)
	st, _ := g.Apps().Status(slug)
	w.Header().Set("ETag", etag(rec.Generation))
	admJSON(w, status, a.appView(ar, st))
}

// deleteApp removes an app registered through the admin API: its loop
// stops, its route goes, and its stored record is deleted. If-Match, when
// given, must be the app's generation.
func (a *adminServer) deleteApp(w http.ResponseWriter, r *http.Request) {
	g := a.g
	slug := chi.URLParam(r, "slug")
	gen, err := ifMatch(r)
	if err != nil {
		admError(w, http.StatusBadRequest, "bad_if_match", err.Error(), "If-Match")
		return
	}
	g.ap.change.Lock()
	defer g.ap.change.Unlock()
	cur := g.ap.route(slug)
	switch {
	case cur == nil:
		admError(w, http.StatusNotFound, "app_not_found", "no app with slug "+strconv.Quote(slug), "slug")
		return
	case cur.gen == 0:
		admError(w, http.StatusConflict, "config_app", "app "+strconv.Quote(slug)+" is declared in the config file; remove it there", "slug")
		return
	case gen != 0 && cur.gen != gen:
		admError(w, http.StatusConflict, "conflict", fmt.Sprintf("If-Match %d is stale: the app is at generation %d", gen, cur.gen), "If-Match")
		return
	}
	ctx := r.Context()
	prev, err := g.store.GetApp(ctx, slug)
	switch {
	case errors.Is(err, registry.ErrNotFound):
	case err != nil:
		admFail(w, err)
		return
	case prev.Generation != cur.gen:
		admError(w, http.StatusConflict, "conflict", fmt.Sprintf("the stored app is at generation %d, this gateway serves %d; read it again", prev.Generation, cur.gen), "If-Match")
		return
	default:
		if err := g.store.DeleteApp(ctx, slug, registry.AppCond(prev)); err != nil {
			admFail(w, err)
			return
		}
	}
	g.rtUninstall(slug)
	a.log.Info("app removed", "app", slug)
	w.WriteHeader(http.StatusNoContent)
}
