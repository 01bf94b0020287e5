package gateway

import (
	"context"
	"fmt"
	"github.com/wakegate/wakegate/route"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// routeTable is this instance's app route table (DESIGN rules 11-14): one
// route per app, by slug, with the observer of the apps (wake.Apps) and one
// observation loop per app. It is the wake.AppRoutes the observer walks its
// ladder against.
//
// A route starts as a candidate. Only the self-probe reaches a candidate,
// and only a self-probe that passes publishes it; the observer withdraws it
// after failure_threshold failed observations in a row. Every app, of the
// config, of the admin API or of the store, joins through install and
// leaves through uninstall, called by the registrar (control/apps.go):
// their loops run under the same owner (Serve's background work).
//
// The table is copy on write: the request path loads it with one atomic
// read; installs and removals are serialised by change and publish a
// changed copy.
type routeTable struct {
	routes atomic.Pointer[map[string]*route.App] // by slug; never changed once stored
	// change serialises installs and removals; the registrar holds it
	// across the store write that goes with one.
	change sync.Mutex
	apps   *wake.Apps // the observer: statuses, refreshes, operations
	states appStates  // the stored desired states (appstates.go)
	loops  appLoops   // one observation loop per app
	probe  selfProbes // the self-probe client and its hygiene (selfprobe.go)
	// onChange, when set, runs after every change of the table.
	onChange func()

	log      *slog.Logger
	events   *wake.Bus
	homes    func(id string) (*route.Home, bool) // the gateway's home table
	draining func() bool                         // observations pause while draining
}

// newAppRoute returns the candidate route of ac, whose defaults are filled
// and which passed its checks: an app in a home gets the home routed now.
func newAppRoute(ac registry.App, gen uint64, homes func(string) (*route.Home, bool)) *route.App {
	var home *route.Home
	if ac.Upstream == "" {
		home, _ = homes(ac.Home)
	}
	return route.NewApp(ac, gen, home)
}

// newRouteTable returns an empty table with an observer of its own; the
// registrar installs the apps (control/apps.go). g's engine, homes and
// log are ready.
func newRouteTable(g *Gateway) *routeTable {
	t := &routeTable{probe: selfProbes{control.NewSelfProber(g.cfg.Proxy.DialTimeout)}, log: g.log, events: g.engine.Events(),
		homes: g.homeWithID, draining: g.draining.Load}
	t.routes.Store(&map[string]*route.App{})
	t.apps = wake.NewApps(wake.AppsOptions{Engine: g.engine, Routes: t, Events: t.events,
		Log: g.log.With("component", "apps"), Desired: g.storeAppState})
	return t
}

// route returns slug's route, or nil.
func (t *routeTable) route(slug string) *route.App { return (*t.routes.Load())[slug] }

// App returns slug's route, or nil (route.Apps).
func (t *routeTable) App(slug string) *route.App { return t.route(slug) }

// all returns the table (never to be changed).
func (t *routeTable) all() map[string]*route.App { return *t.routes.Load() }

// set publishes a table with r at slug (nil r removes slug); the caller
// holds t.change.
func (t *routeTable) set(slug string, r *route.App) {
	m := maps.Clone(*t.routes.Load())
	if r == nil {
		delete(m, slug)
	} else {
		m[slug] = r
	}
	t.routes.Store(&m)
	if t.onChange != nil {
		t.onChange() // host names follow the apps (gateway_tls.go)
	}
}

// published reports whether ar is the route of its slug and is published
// (a replaced route is not, whatever it was).
func (t *routeTable) published(ar *route.App) bool {
	r := t.route(ar.Config().Slug)
	return r == ar && r.Published()
}

// install puts ac into the table as a candidate with generation gen, in
// place of any app with its slug, registers it with the observer and
// starts its loop. The caller holds t.change and has checked ac.
func (t *routeTable) install(ac registry.App, gen uint64) {
	slug := ac.Slug
	t.loops.stop(slug)
	t.Withdraw(slug, "replaced")
	ar := newAppRoute(ac, gen, t.homes)
	t.set(slug, ar)
	ar.SetPulse(t.apps.Put(ac))
	if stopped, ok := t.states.get(slug); ok {
		t.apps.SetDesired(slug, stopped) // the operator's word over the declared state
	}
	t.loops.start(slug, ac.Health.Interval.Duration())
}

// uninstall ends slug's loop, unpublishes and removes its route and stops
// observing it; the caller holds t.change. Once it returns, no health
// check or self-probe of the app runs.
func (t *routeTable) uninstall(slug string) {
	t.loops.stop(slug)
	t.Withdraw(slug, "removed")
	t.set(slug, nil)
	t.apps.Remove(slug)
}

// run observes every app at once and then every health interval, until
// ctx is done; apps installed meanwhile get their loops under the same
// owner. Serve owns it.
func (t *routeTable) run(ctx context.Context) {
	t.loops.run(ctx, t.all, t.observe)
}

// observe is one app's observation loop: it observes the app at once and
// then whenever the observer's schedule says (every health interval, less
// often while the app passes; wake/apps_schedule.go), until ctx is done.
// Observations are skipped while the gateway drains.
func (t *routeTable) observe(ctx context.Context, slug string, _ time.Duration) {
	for {
		if !t.draining() {
			_, _ = t.apps.Refresh(ctx, slug, "")
		}
		if !t.apps.AwaitObservation(ctx, slug) {
			return
		}
	}
}

// close stops the observer and drops the self-probe's connections.
func (t *routeTable) close() {
	t.apps.Close()
	t.probe.Close()
}

// RouteState returns slug's route state; ok is false until Serve listens.
func (t *routeTable) RouteState(slug string) (wake.RouteState, bool) {
	r := t.route(slug)
	if r == nil || !t.probe.Ready() {
		return "", false
	}
	if r.Published() {
		return wake.RoutePublished, true
	}
	return wake.RouteCandidate, true
}

// SelfProbe sends GET /apps/{slug}{health.path} through the gateway's own
// listener with the probe token and publishes the route when the status
// passes the app kind's rules.
func (t *routeTable) SelfProbe(ctx context.Context, slug string) (int, error) {
	r := t.route(slug)
	if r == nil || !t.probe.Ready() {
		return 0, fmt.Errorf("self-probe %s: no route to probe", slug)
	}
	ac := r.Config()
	code, err := t.probe.Get(ctx, r.Prefix()+ac.Health.Path)
	if err != nil {
		return 0, fmt.Errorf("self-probe %s: %w", slug, err)
	}
	if !wake.StatusPasses(code, ac.API()) {
		return code, fmt.Errorf("self-probe %s: status %d %s", slug, code, http.StatusText(code))
	}
	if !r.SetPublished(true) {
		t.log.Info("route published", "app", slug, "status", code)
		t.events.Publish(wake.Event{Type: wake.EventRoutePublished, App: slug, Home: ac.Home,
			Message: "the self-probe through the gateway passed (" + strconv.Itoa(code) + ")"})
	}
	return code, nil
}

// Withdraw unpublishes slug's route.
func (t *routeTable) Withdraw(slug, reason string) {
	r := t.route(slug)
	if r == nil || !r.SetPublished(false) {
		return
	}
	msg, failed := withdrawnNote(reason)
	if failed {
		t.log.Warn("route withdrawn", "app", slug, "reason", reason, "note", msg)
	} else {
		t.log.Info("route withdrawn", "app", slug, "reason", reason, "note", msg)
	}
	t.events.Publish(wake.Event{Type: wake.EventRouteWithdrawn, App: slug, Home: r.Config().Home, Reason: reason,
		Message: msg})
}

// withdrawnNote is the sentence for a route withdrawn for reason, and
// whether the reason is a failure rather than the app's ordinary life (its
// home suspended when idle, the app stopped, replaced or removed).
func withdrawnNote(reason string) (string, bool) {
	switch reason {
	case wake.ReasonHomeSleeping, wake.ReasonHomeWaking:
		return "the app's home sleeps; the route is withdrawn until the next wake proves it again", false
	case wake.ReasonStopped:
		return "the app is stopped; the route is withdrawn until it is started", false
	case "replaced", "removed":
		return "the app was " + reason + "; its route is withdrawn", false
	}
	return "the app failed its observations; the route is withdrawn until a new self-probe passes", true
}

// appLoops owns the observation loops of apps, one per slug. Serve's
// background context is their owner: run starts a loop for every app and
// returns once they all ended; start and stop add and end loops of apps
// installed and removed meanwhile.
type appLoops struct {
	mu    sync.Mutex
	ctx   context.Context // the owner's; nil before run and after the owner is done
	fn    func(ctx context.Context, slug string, every time.Duration)
	loops map[string]*appLoop
	wg    sync.WaitGroup
}

// appLoop is one running loop.
type appLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// run starts fn for every app of table() (read under the lock, so that an
// app installed concurrently gets exactly one loop), waits for ctx, and
// then for every loop to end.
func (l *appLoops) run(ctx context.Context, table func() map[string]*route.App, fn func(context.Context, string, time.Duration)) {
	l.mu.Lock()
	l.ctx, l.fn, l.loops = ctx, fn, map[string]*appLoop{}
	for slug, r := range table() {
		l.startLocked(slug, r.Config().Health.Interval.Duration())
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
func (l *appLoops) start(slug string, every time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startLocked(slug, every)
}

func (l *appLoops) startLocked(slug string, every time.Duration) {
	if l.ctx == nil || l.ctx.Err() != nil || l.loops[slug] != nil {
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	lp := &appLoop{cancel: cancel, done: make(chan struct{})}
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
func (l *appLoops) stop(slug string) {
	l.mu.Lock()
	lp := l.loops[slug]
	delete(l.loops, slug)
	l.mu.Unlock()
	if lp != nil {
		lp.cancel()
		<-lp.done
	}
}

var _ wake.AppRoutes = (*routeTable)(nil)

// Apps returns the app observer: statuses, refreshes, waits and the start,
// stop and restart operations (for the admin API).
func (g *Gateway) Apps() *wake.Apps { return g.routeTab.apps }

// AppRoute is one entry of the route table.
type AppRoute struct {
	Slug  string          `json:"slug"`
	State wake.RouteState `json:"state"`
}

// Routes returns a snapshot of this instance's route table, by slug.
func (g *Gateway) Routes() []AppRoute {
	out := make([]AppRoute, 0, len(g.routeTab.all()))
	for _, st := range g.routeTab.apps.List() {
		state := wake.RouteCandidate
		if r := g.routeTab.route(st.Slug); r != nil && r.Published() {
			state = wake.RoutePublished
		}
		out = append(out, AppRoute{Slug: st.Slug, State: state})
	}
	return out
}

// appBySlug returns the app routed at /apps/{slug}.
func (g *Gateway) appBySlug(slug string) (*route.App, bool) {
	r := g.routeTab.route(slug)
	return r, r != nil
}
