package control

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/registry"
)

// AppRoute is one app's entry in the app route table (route.App) as the
// table needs it. A changed app gets a new entry; what one holds never
// changes, except whether it is published and its pulse.
type AppRoute interface {
	// Config is the app as registered; the caller must not change it.
	Config() *registry.App
	// Prefix is the app's path prefix, "/apps/{slug}".
	Prefix() string
	// Generation is the stored generation of an app registered through
	// the admin API, 0 for an app of the config.
	Generation() uint64
	// HomeID is the id of the home the app runs in, "" for an app with an
	// upstream.
	HomeID() string
	// Published reports whether everyone may reach the app.
	Published() bool
	// SetPublished publishes the app (or withdraws it) and reports
	// whether it was published before.
	SetPublished(on bool) (was bool)
	// SetPulse gives the app the observer's record of its answers.
	SetPulse(p *appstatus.Pulse)
}

// AppRouteMaker builds the candidate route of an app whose defaults are
// filled and which passed its checks, with stored generation gen: an app
// in a home gets the home as it is routed now.
type AppRouteMaker[A AppRoute] interface {
	NewApp(ac registry.App, gen uint64) A
}

// Draining tells whether the gateway drains; observations pause meanwhile.
type Draining interface {
	Draining() bool
}

// AppEngine is what an AppTable asks of the wake engine: the homes its
// apps run in, for their observer, and the bus its publications and
// withdrawals go to.
type AppEngine interface {
	appstatus.Homes
	Events() *events.Bus
}

// AppTableOptions are what an AppTable is built from; every field is
// required.
type AppTableOptions[A AppRoute] struct {
	Routes AppRouteMaker[A]
	// Engine answers for the runtime of apps in homes; its events carry
	// the table's publications and withdrawals.
	Engine AppEngine
	// Store keeps the apps' desired states; Instance names this gateway
	// as their writer.
	Store    registry.Store
	Instance string
	// Prober sends the self-probes through the gateway's own listener.
	Prober   *SelfProber
	Draining Draining
	Log      *slog.Logger
}

// AppTable is this instance's app route table (DESIGN rules 11-14): one
// route per app, by slug, with the observer of the apps (appstatus.Apps) and
// one observation loop per app. It is the appstatus.Routes the observer
// walks its ladder against, the Apps the registrar changes and the table
// the request path reads (route.Apps).
//
// A route starts as a candidate. Only the self-probe reaches a candidate,
// and only a self-probe that passes publishes it; the observer withdraws
// it after failure_threshold failed observations in a row. Every app, of
// the config, of the admin API or of the store, joins through Install and
// leaves through Uninstall, called by the registrar (apps.go): their loops
// run under the same owner (Run's, the gateway's background work).
//
// The table is copy on write: the request path loads it with one atomic
// read; installs and removals are serialised by Lock and publish a
// changed copy.
type AppTable[A AppRoute] struct {
	routes atomic.Pointer[map[string]A] // by slug; never changed once stored
	// change serialises installs and removals; the registrar holds it
	// across the store write that goes with one.
	change sync.Mutex
	apps   *appstatus.Apps // the observer: statuses, refreshes, operations
	states appStates       // the stored desired states (appstates.go)
	loops  appLoops        // one observation loop per app
	probe  *SelfProber
	build  AppRouteMaker[A]
	// onChange, when set, runs after every change of the table.
	onChange func()

	log      *slog.Logger
	events   *events.Bus
	store    registry.Store
	instance string
	draining Draining
}

// NewAppTable returns an empty table with an observer of its own; the
// registrar installs the apps (apps.go).
func NewAppTable[A AppRoute](o AppTableOptions[A]) *AppTable[A] {
	t := &AppTable[A]{probe: o.Prober, build: o.Routes, log: o.Log, events: o.Engine.Events(),
		store: o.Store, instance: o.Instance, draining: o.Draining}
	t.routes.Store(&map[string]A{})
	t.apps = appstatus.New(appstatus.Options{Homes: o.Engine, Routes: t, Events: t.events,
		Log: o.Log.With("component", "apps"), Desired: t.storeState})
	return t
}

// Lookup returns slug's route.
func (t *AppTable[A]) Lookup(slug string) (A, bool) {
	r, ok := (*t.routes.Load())[slug]
	return r, ok
}

// App returns slug's route, or the zero A (route.Apps: one atomic load and
// one map hit).
func (t *AppTable[A]) App(slug string) A { return (*t.routes.Load())[slug] }

// All returns the table (never to be changed).
func (t *AppTable[A]) All() map[string]A { return *t.routes.Load() }

// Observer is the app observer: statuses, refreshes, waits and the start,
// stop and restart operations.
func (t *AppTable[A]) Observer() *appstatus.Apps { return t.apps }

// OnChange has f run after every change of the table (host names follow
// the apps). Set it before Run.
func (t *AppTable[A]) OnChange(f func()) {
	t.change.Lock()
	defer t.change.Unlock()
	t.onChange = f
}

// set publishes a table with r at slug; the caller holds t.change.
func (t *AppTable[A]) set(slug string, r A) {
	m := maps.Clone(*t.routes.Load())
	m[slug] = r
	t.publish(m)
}

// drop publishes a table without slug; the caller holds t.change.
func (t *AppTable[A]) drop(slug string) {
	m := maps.Clone(*t.routes.Load())
	delete(m, slug)
	t.publish(m)
}

func (t *AppTable[A]) publish(m map[string]A) {
	t.routes.Store(&m)
	if t.onChange != nil {
		t.onChange()
	}
}

// Published reports whether slug's route is published.
func (t *AppTable[A]) Published(slug string) bool {
	r, ok := t.Lookup(slug)
	return ok && r.Published()
}

// Lock serialises changes of the table (Apps).
func (t *AppTable[A]) Lock() { t.change.Lock() }

// Unlock ends a change of the table (Apps).
func (t *AppTable[A]) Unlock() { t.change.Unlock() }

// Install puts ac into the table as a candidate with generation gen, in
// place of any app with its slug, registers it with the observer and
// starts its loop. The caller holds Lock and has checked ac.
func (t *AppTable[A]) Install(ac registry.App, gen uint64) {
	slug := ac.Slug
	t.loops.stop(slug)
	t.Withdraw(slug, "replaced")
	ar := t.build.NewApp(ac, gen)
	t.set(slug, ar)
	ar.SetPulse(t.apps.Put(ac))
	if stopped, ok := t.states.get(slug); ok {
		t.apps.SetDesired(slug, stopped) // the operator's word over the declared state
	}
	t.loops.start(slug, ac.Health.Interval.Duration())
}

// Uninstall ends slug's loop, unpublishes and removes its route and stops
// observing it; the caller holds Lock. Once it returns, no health check
// or self-probe of the app runs.
func (t *AppTable[A]) Uninstall(slug string) {
	t.loops.stop(slug)
	t.Withdraw(slug, "removed")
	t.drop(slug)
	t.apps.Remove(slug)
}

// Generation returns the stored generation of the app served at slug.
func (t *AppTable[A]) Generation(slug string) (uint64, bool) {
	if ar, ok := t.Lookup(slug); ok {
		return ar.Generation(), true
	}
	return 0, false
}

// Generations returns every app served, by slug, with its stored
// generation.
func (t *AppTable[A]) Generations() map[string]uint64 {
	all := t.All()
	gens := make(map[string]uint64, len(all))
	for slug, ar := range all {
		gens[slug] = ar.Generation()
	}
	return gens
}

// InHome returns the slug of an app that runs in home id, if any.
func (t *AppTable[A]) InHome(id string) (string, bool) {
	for _, ar := range t.All() {
		if h := ar.HomeID(); h != "" && h == id {
			return ar.Config().Slug, true
		}
	}
	return "", false
}

// ApplyState records an operator's stored desired state of slug and
// applies it to the app served there.
func (t *AppTable[A]) ApplyState(slug string, stopped bool) bool {
	return t.states.set(slug, stopped) && t.apps.SetDesired(slug, stopped)
}

// Run observes every app at once and then every health interval, until
// ctx is done; apps installed meanwhile get their loops under the same
// owner. The gateway's background work owns it.
func (t *AppTable[A]) Run(ctx context.Context) {
	t.loops.run(ctx, t.intervals, t.observe)
}

// intervals are the health intervals of the apps in the table, by slug.
func (t *AppTable[A]) intervals() map[string]time.Duration {
	all := t.All()
	out := make(map[string]time.Duration, len(all))
	for slug, r := range all {
		out[slug] = r.Config().Health.Interval.Duration()
	}
	return out
}

// observe is one app's observation loop: it observes the app at once and
// then whenever the observer's schedule says (every health interval, less
// often while the app passes; appstatus/schedule.go), until ctx is done.
// Observations are skipped while the gateway drains.
func (t *AppTable[A]) observe(ctx context.Context, slug string, _ time.Duration) {
	for {
		if !t.draining.Draining() {
			_, _ = t.apps.Refresh(ctx, slug, "")
		}
		if !t.apps.AwaitObservation(ctx, slug) {
			return
		}
	}
}

// Close stops the observer and drops the self-probe's connections.
func (t *AppTable[A]) Close() {
	t.apps.Close()
	t.probe.Close()
}

// RouteState returns slug's route state; ok is false until the gateway
// listens (appstatus.Routes).
func (t *AppTable[A]) RouteState(slug string) (appstatus.RouteState, bool) {
	r, ok := t.Lookup(slug)
	if !ok || !t.probe.Ready() {
		return "", false
	}
	if r.Published() {
		return appstatus.RoutePublished, true
	}
	return appstatus.RouteCandidate, true
}

// SelfProbe sends GET /apps/{slug}{health.path} through the gateway's own
// listener with the probe token and publishes the route when the status
// passes the app kind's rules (appstatus.Routes).
func (t *AppTable[A]) SelfProbe(ctx context.Context, slug string) (int, error) {
	r, ok := t.Lookup(slug)
	if !ok || !t.probe.Ready() {
		return 0, fmt.Errorf("self-probe %s: no route to probe", slug)
	}
	ac := r.Config()
	code, err := t.probe.get(ctx, r.Prefix()+ac.Health.Path)
	if err != nil {
		return 0, fmt.Errorf("self-probe %s: %w", slug, err)
	}
	if !probe.StatusPasses(code, ac.API()) {
		return code, fmt.Errorf("self-probe %s: status %d %s", slug, code, http.StatusText(code))
	}
	if !r.SetPublished(true) {
		t.log.Info("route published", "app", slug, "status", code)
		t.events.Publish(events.Event{Type: events.RoutePublished, App: slug, Home: ac.Home,
			Message: "the self-probe through the gateway passed (" + strconv.Itoa(code) + ")"})
	}
	return code, nil
}

// Withdraw unpublishes slug's route (appstatus.Routes).
func (t *AppTable[A]) Withdraw(slug, reason string) {
	r, ok := t.Lookup(slug)
	if !ok || !r.SetPublished(false) {
		return
	}
	msg, failed := withdrawnNote(reason)
	if failed {
		t.log.Warn("route withdrawn", "app", slug, "reason", reason, "note", msg)
	} else {
		t.log.Info("route withdrawn", "app", slug, "reason", reason, "note", msg)
	}
	t.events.Publish(events.Event{Type: events.RouteWithdrawn, App: slug, Home: r.Config().Home, Reason: reason,
		Message: msg})
}

// RouteEntry is one entry of the route table as the operator sees it.
type RouteEntry struct {
	Slug  string               `json:"slug"`
	State appstatus.RouteState `json:"state"`
}

// Routes returns a snapshot of the route table, by slug in the observer's
// order.
func (t *AppTable[A]) Routes() []RouteEntry {
	list := t.apps.List()
	out := make([]RouteEntry, 0, len(list))
	for _, st := range list {
		state := appstatus.RouteCandidate
		if t.Published(st.Slug) {
			state = appstatus.RoutePublished
		}
		out = append(out, RouteEntry{Slug: st.Slug, State: state})
	}
	return out
}

// withdrawnNote is the sentence for a route withdrawn for reason, and
// whether the reason is a failure rather than the app's ordinary life (its
// home suspended when idle, the app stopped, replaced or removed).
func withdrawnNote(reason string) (string, bool) {
	switch reason {
	case appstatus.ReasonHomeSleeping, appstatus.ReasonHomeWaking:
		return "the app's home sleeps; the route is withdrawn until the next wake proves it again", false
	case appstatus.ReasonStopped:
		return "the app is stopped; the route is withdrawn until it is started", false
	case "replaced", "removed":
		return "the app was " + reason + "; its route is withdrawn", false
	}
	return "the app failed its observations; the route is withdrawn until a new self-probe passes", true
}

// appLoops owns the observation loops of apps, one per slug. Run's
// context (the gateway's background work) is their owner: run starts a loop for every app and
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
func (l *appLoops) run(ctx context.Context, table func() map[string]time.Duration, fn func(context.Context, string, time.Duration)) {
	l.mu.Lock()
	l.ctx, l.fn, l.loops = ctx, fn, map[string]*appLoop{}
	for slug, every := range table() {
		l.startLocked(slug, every)
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

var (
	_ appstatus.Routes = (*AppTable[AppRoute])(nil)
	_ Apps             = (*AppTable[AppRoute])(nil)
)

// ServedApp is an app the route table serves: as registered, with its
// stored generation (0 for an app of the config).
type ServedApp struct {
	App        registry.App
	Generation uint64
}

// Served returns the app served at slug (adminapi.AppRoutes).
func (t *AppTable[A]) Served(slug string) (ServedApp, bool) {
	ar, ok := t.Lookup(slug)
	if !ok {
		return ServedApp{}, false
	}
	return ServedApp{App: *ar.Config(), Generation: ar.Generation()}, true
}

// AllServed returns every app served, in no order (adminapi.AppRoutes).
func (t *AppTable[A]) AllServed() []ServedApp {
	all := t.All()
	out := make([]ServedApp, 0, len(all))
	for _, ar := range all {
		out = append(out, ServedApp{App: *ar.Config(), Generation: ar.Generation()})
	}
	return out
}
