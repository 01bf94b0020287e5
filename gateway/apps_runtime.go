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
		l.startLocked(slug, r.app.cfg.Health.Interval.Duration())
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

// rtInstall puts ac into the route table as a candidate with generation
// gen, in place of any app with its slug, registers it with the observer
// and starts its loop. The caller holds g.ap.change and has checked ac.
func (g *Gateway) rtInstall(ac registry.App, gen uint64) {
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
	g.ap.apps.Put(ac)
	g.ap.loops.start(slug, ac.Health.Interval.Duration())
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
		ac := rec
		ac.Default()
		var problems []string
		ac.Check(func(id string) bool { _, ok := g.homeWithID(id); return ok }, func(field, format string, args ...any) {
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

// appFromRequest fills the defaults of an app decoded from a PUT body for
// slug and checks it with the config's rules, naming every bad field. The
// fields the gateway keeps (generation, owner, updated_at) are not the
// caller's to set: If-Match names the generation a caller read.
func (a *adminServer) appFromRequest(slug string, ac registry.App) (registry.App, []admFieldErr) {
	var errs []admFieldErr
	bad := func(f, format string, args ...any) { errs = append(errs, admFieldErr{f, fmt.Sprintf(format, args...)}) }
	if ac.Slug != "" && ac.Slug != slug {
		bad("slug", "the body names app %q but the URL names %q", ac.Slug, slug)
	}
	if ac.Generation != 0 {
		bad("generation", "set by the gateway; send the generation you read in If-Match")
	}
	if ac.Owner != "" || !ac.UpdatedAt.IsZero() {
		bad("owner", "owner and updated_at are set by the gateway")
	}
	ac.Slug = slug
	ac.Default()
	ac.Check(func(id string) bool { _, ok := a.g.homeWithID(id); return ok }, bad)
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
	var req registry.App
	if field, err := admDecode(r, &req); err != nil {
		admError(w, http.StatusBadRequest, "bad_request", err.Error(), field)
		return
	}
	ac, errs := a.appFromRequest(slug, req)
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
	rec := ac
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
