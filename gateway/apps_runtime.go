package gateway

import (
	"context"
	"maps"
	"net/url"
	"sync"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// Apps registered at runtime (registrar_apps.go) join the route table
// through rtInstall and leave it through rtUninstall, exactly like an app
// of the config at start: the observation loop of each runs under the same
// owner as the others (Serve's background work), and only its self-probe
// publishes it.
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
