package wake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// Phase is an app's observed phase.
type Phase string

// Phases of an app.
const (
	PhaseStarting Phase = "starting"
	PhaseReady    Phase = "ready"
	PhaseStopped  Phase = "stopped"
	PhaseFailed   Phase = "failed"
	PhaseUnknown  Phase = "unknown"
)

// Reason codes of an app's phase, one per rung of the ladder.
const (
	ReasonNotObserved      = "not-observed"       // unknown: no observation yet
	ReasonStopped          = "stopped"            // stopped: desired state is stopped
	ReasonRuntimeFailed    = "runtime-failed"     // failed: the home failed
	ReasonHomeSleeping     = "home-sleeping"      // starting: the home sleeps; a request wakes it
	ReasonHomeWaking       = "home-waking"        // starting: the home is waking
	ReasonHealthStarting   = "health-starting"    // starting: unhealthy inside the start period
	ReasonUnhealthy        = "unhealthy"          // failed: unhealthy after the start period
	ReasonEndpointNotReady = "endpoint-not-ready" // starting: the upstream does not accept connections
	ReasonRoutePending     = "route-pending"      // starting: no route to probe yet
	ReasonProbeFailed      = "probe-failed"       // starting: the self-probe did not pass
	ReasonReady            = "ready"              // ready: every rung passed
)

// RouteState is the state of an app's route in a gateway instance's table.
type RouteState string

// Route states.
const (
	// RouteCandidate is reached by the self-probe only.
	RouteCandidate RouteState = "candidate"
	// RoutePublished is reached by everyone.
	RoutePublished RouteState = "published"
)

// Default budgets of WaitPhase.
const (
	DefaultWaitReady   = 120 * time.Second
	DefaultWaitStopped = 60 * time.Second
)

// AppStatus is an app's observed status.
type AppStatus struct {
	Slug  string `json:"slug"`
	Phase Phase  `json:"phase"`
	// Reason is a stable code (Reason* constants); Message a sentence.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// ObservedAt is when the observation finished (zero: never observed).
	ObservedAt time.Time `json:"observed_at"`
	// Route is the app's route state in this gateway instance.
	Route RouteState `json:"route"`
	// ProbeStatus is the HTTP status the last self-probe saw (0: none).
	ProbeStatus int `json:"probe_status,omitempty"`
	// Operation is the phase of a start, stop or restart in progress, for
	// example "start.waitReady" ("" when none).
	Operation string `json:"operation,omitempty"`
	// Stale is set on a status returned because a refresh ran out of time
	// (the last stored status, not a new observation).
	Stale bool `json:"stale,omitempty"`
}

// AppHealth is how an app's health is checked directly at its upstream.
type AppHealth struct {
	// Type is "http" or "tcp".
	Type string
	// Path is the http check's path, joined to the app's base URL.
	Path string
	// Interval is the pause between observations (used by the gateway's
	// loop; carried here for reference).
	Interval time.Duration
	// Timeout bounds one health check.
	Timeout time.Duration
	// StartPeriod is the grace after the runtime started during which an
	// unhealthy check means starting rather than failed.
	StartPeriod time.Duration
}

// AppSpec is what the gateway's config says about an app. Every duration is
// filled by the config defaults.
type AppSpec struct {
	Slug string
	// API selects the API status rules (401 and 403 pass too).
	API bool
	// Home is the id of the home the app runs in ("" for a URL app).
	Home string
	// Upstream is a URL app's base URL.
	Upstream string
	// Path is a home app's base path on the home's endpoint.
	Path string
	// Header is sent with direct health checks (the home's relay token).
	Header http.Header
	Health AppHealth
	// Stopped is the desired state at start: true keeps the app stopped.
	Stopped bool
	// FailureThreshold is how many failed observations in a row unpublish
	// a published route.
	FailureThreshold int
	// MinRefresh is how long an observation is reused.
	MinRefresh time.Duration
	// RefreshTimeout bounds one observation as a whole.
	RefreshTimeout time.Duration
}

// AppRoutes is a gateway instance's route table as app status sees it.
// Implementations are safe for concurrent use.
type AppRoutes interface {
	// RouteState returns the state of slug's route; ok is false when the
	// table cannot route slug yet (no entry, or not listening).
	RouteState(slug string) (state RouteState, ok bool)
	// SelfProbe sends one request through the gateway's own listener,
	// router and proxy to slug's health path, carrying the internal probe
	// token, and publishes the route when the answer passes the app's
	// status rules. It returns the status seen (0 when none) and nil when
	// it passed. It is the only way a route is published.
	SelfProbe(ctx context.Context, slug string) (status int, err error)
	// Withdraw unpublishes slug's route (a no-op for a candidate).
	Withdraw(slug, reason string)
}

// AppsOptions configure Apps.
type AppsOptions struct {
	// Engine answers for the runtime of home apps. Required when any app
	// has a home.
	Engine *Engine
	// Routes is the gateway's route table. Required.
	Routes AppRoutes
	// Events receives app.phase events; nil publishes none.
	Events *Bus
	// Log receives phase changes; nil is slog.Default().
	Log *slog.Logger
}

// Apps observes apps: it walks the ladder of checks, keeps each app's last
// status, coalesces and caches refreshes, and runs start, stop and restart.
type Apps struct {
	o      AppsOptions
	tab    atomic.Pointer[rtAppSet] // copy on write (apps_runtime.go)
	setMu  sync.Mutex               // serialises changes of tab
	client *http.Client
	tr     *http.Transport
	dialer *net.Dialer

	ctx    context.Context // owner of every observation goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// apApp is one app's state.
type apApp struct {
	spec AppSpec
	// since is when a URL app's runtime counts as started: registration.
	since time.Time
	// ctx ends the app's observations: when the app is removed or
	// replaced, or Apps closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	st      AppStatus
	stStart time.Time // when the stored observation started
	flight  *apFlight
	fails   int  // failed observations in a row
	stopped bool // desired state
	op      string
	changed chan struct{} // closed and replaced whenever st changes
}

// apFlight is one observation in progress; refreshes join it.
type apFlight struct {
	start    time.Time
	done     chan struct{}
	st       AppStatus
	timedOut bool
}

// NewApps returns Apps for specs. Close it to stop its goroutines.
func NewApps(o AppsOptions, specs []AppSpec) *Apps {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	a := &Apps{o: o, dialer: &net.Dialer{}}
	a.tr = &http.Transport{Proxy: nil, DialContext: a.dialer.DialContext, DisableKeepAlives: true, DisableCompression: true}
	a.client = &http.Client{Transport: a.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	set := &rtAppSet{byslug: map[string]*apApp{}}
	for _, s := range specs {
		set.byslug[s.Slug] = a.rtNewApp(s)
		set.order = append(set.order, s.Slug)
	}
	sort.Strings(set.order)
	a.tab.Store(set)
	return a
}

// Close cancels observations in progress and waits for them.
func (a *Apps) Close() {
	a.cancel()
	a.wg.Wait()
	a.tr.CloseIdleConnections()
}

// Spec returns slug's spec.
func (a *Apps) Spec(slug string) (AppSpec, bool) {
	ap := a.app(slug)
	if ap == nil {
		return AppSpec{}, false
	}
	return ap.spec, true
}

// Status returns slug's last stored status without observing it.
func (a *Apps) Status(slug string) (AppStatus, bool) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, false
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return a.current(ap), true
}

// current is ap's stored status with the live route state and operation;
// ap.mu is held.
func (a *Apps) current(ap *apApp) AppStatus {
	st := ap.st
	st.Operation = ap.op
	if rs, ok := a.o.Routes.RouteState(ap.spec.Slug); ok {
		st.Route = rs
	} else {
		st.Route = RouteCandidate
	}
	return st
}

// List returns every app's last stored status, by slug.
func (a *Apps) List() []AppStatus {
	order := a.tab.Load().order
	out := make([]AppStatus, 0, len(order))
	for _, slug := range order {
		st, _ := a.Status(slug)
		out = append(out, st)
	}
	return out
}

// Stopped reports whether slug's desired state is stopped.
func (a *Apps) Stopped(slug string) bool {
	ap := a.app(slug)
	if ap == nil {
		return false
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.stopped
}

// ErrNoApp is returned for a slug that names no app.
var ErrNoApp = errors.New("no such app")

// Refresh observes slug unless an observation younger than min_refresh is
// stored, joining the one in flight if any, and returns the status. When
// waitFor is not empty it then waits, as WaitPhase with the default
// budget, for that phase.
func (a *Apps) Refresh(ctx context.Context, slug string, waitFor Phase) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("refresh %s: %w", slug, ErrNoApp)
	}
	st := a.refresh(ctx, ap, time.Now().Add(-ap.spec.MinRefresh))
	if waitFor == "" {
		return st, nil
	}
	return a.WaitPhase(ctx, slug, waitFor, 0)
}

// RefreshSince returns an observation of slug that started at or after
// since: the stored one if it is recent enough, the one in flight if it
// started late enough, or a new one. Concurrent callers share one
// observation. The observation runs detached from ctx, bounded by
// refresh_timeout; a caller whose ctx ends first, or whose observation ran
// out of time, gets the last stored status marked Stale.
func (a *Apps) RefreshSince(ctx context.Context, slug string, since time.Time) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("refresh %s: %w", slug, ErrNoApp)
	}
	return a.refresh(ctx, ap, since), nil
}

func (a *Apps) refresh(ctx context.Context, ap *apApp, since time.Time) AppStatus {
	for {
		ap.mu.Lock()
		if !ap.stStart.IsZero() && !ap.stStart.Before(since) {
			st := a.current(ap)
			ap.mu.Unlock()
			return st
		}
		f := ap.flight
		if f == nil {
			if ap.ctx.Err() != nil {
				st := a.current(ap)
				ap.mu.Unlock()
				st.Stale = true
				return st
			}
			f = &apFlight{start: time.Now(), done: make(chan struct{})}
			ap.flight = f
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.observe(ap, f)
			}()
		}
		ap.mu.Unlock()
		select {
		case <-f.done:
			if f.timedOut || !f.start.Before(since) {
				return f.st
			}
			// It started before since: observe again.
		case <-ctx.Done():
			ap.mu.Lock()
			st := a.current(ap)
			ap.mu.Unlock()
			st.Stale = true
			return st
		}
	}
}

// observe runs one observation of ap and stores it. It owns f.
func (a *Apps) observe(ap *apApp, f *apFlight) {
	ctx, cancel := context.WithTimeout(ap.ctx, ap.spec.RefreshTimeout)
	defer cancel()
	ob := a.ladder(ctx, ap)
	timedOut := ctx.Err() != nil && ob.Phase != PhaseReady

	ap.mu.Lock()
	prev := ap.st
	if timedOut {
		// The observation ran out: keep the last stored status, and count
		// the failure (the app did not prove itself).
		ap.fails++
	} else {
		ap.st = ob
		ap.stStart = f.start
		if ob.Phase == PhaseReady {
			ap.fails = 0
		} else {
			ap.fails++
		}
	}
	withdraw := ap.stopped || ap.fails >= ap.spec.FailureThreshold
	if withdraw {
		a.o.Routes.Withdraw(ap.spec.Slug, ap.st.Reason)
	}
	f.st, f.timedOut = a.current(ap), timedOut
	if timedOut {
		f.st.Stale = true
	}
	changed := prev.Phase != ap.st.Phase || prev.Reason != ap.st.Reason
	if !timedOut {
		close(ap.changed)
		ap.changed = make(chan struct{})
	}
	ap.flight = nil
	if changed {
		// Published under the app's lock, so that its events keep the
		// order of what happened to it (a stop's withdrawal comes after).
		a.o.Events.Publish(Event{Type: EventAppPhase, App: ap.spec.Slug, Home: ap.spec.Home,
			Phase: string(ob.Phase), Reason: ob.Reason, Message: ob.Message, Time: ob.ObservedAt})
	}
	ap.mu.Unlock()
	close(f.done)
	if changed {
		a.o.Log.Info("app phase", "app", ap.spec.Slug, "phase", string(ob.Phase), "reason", ob.Reason, "message", ob.Message)
	}
}

// ladder walks the checks of DESIGN rule 11 in order and returns the first
// that does not pass, or ready.
func (a *Apps) ladder(ctx context.Context, ap *apApp) AppStatus {
	s := ap.spec
	ap.mu.Lock()
	stopped := ap.stopped
	ap.mu.Unlock()
	out := func(p Phase, reason, format string, args ...any) AppStatus {
		return AppStatus{Slug: s.Slug, Phase: p, Reason: reason, Message: fmt.Sprintf(format, args...), ObservedAt: time.Now()}
	}
	if stopped {
		// A home may still run for other users (or its suspend is in
		// progress); the app is stopped either way and never published.
		return out(PhaseStopped, ReasonStopped, "the app is stopped (its desired state is stopped)")
	}

	// 1-2. Runtime.
	base, since := s.Upstream, ap.since
	if s.Home != "" {
		hs, err := a.o.Engine.HomeState(ctx, s.Home)
		if err != nil {
			return out(PhaseUnknown, ReasonRuntimeFailed, "the home's state could not be read: %v", err)
		}
		switch {
		case hs.Status == registry.StatusFailed || hs.Status == registry.StatusUnknown:
			msg := hs.Reason
			if msg == "" {
				msg = "no reason recorded"
			}
			return out(PhaseFailed, ReasonRuntimeFailed, "home %s is %s: %s", s.Home, hs.Status, msg)
		case hs.Waking || hs.Status == registry.StatusWaking || hs.Status == registry.StatusRestoring:
			return out(PhaseStarting, ReasonHomeWaking, "home %s is waking", s.Home)
		case hs.Status != registry.StatusRunning || hs.Endpoint == "":
			return out(PhaseStarting, ReasonHomeSleeping, "home %s is %s; a request to the app wakes it", s.Home, hs.Status)
		}
		base = hs.Endpoint + s.Path
		if !hs.StartedAt.IsZero() {
			since = hs.StartedAt
		}
	}

	// 3-4. Health check, then endpoint: a check that could not connect
	// says nothing of health, and is the endpoint rung's failure.
	if err := a.check(ctx, s, base); err != nil && ctx.Err() == nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return out(PhaseStarting, ReasonEndpointNotReady, "the upstream does not accept connections: %v", err)
		}
		if time.Since(since) < s.Health.StartPeriod {
			return out(PhaseStarting, ReasonHealthStarting, "the health check has not passed yet (inside the %s start period): %v", s.Health.StartPeriod, err)
		}
		return out(PhaseFailed, ReasonUnhealthy, "the health check failed: %v", err)
	}
	if ctx.Err() != nil {
		return out(PhaseUnknown, ReasonNotObserved, "the observation ran out of time")
	}

	// 5. Route.
	if _, ok := a.o.Routes.RouteState(s.Slug); !ok {
		return out(PhaseStarting, ReasonRoutePending, "the gateway has no route for the app yet")
	}

	// 6. Self-probe through the gateway's own path.
	pctx, cancel := context.WithTimeout(ctx, s.Health.Timeout)
	code, err := a.o.Routes.SelfProbe(pctx, s.Slug)
	cancel()
	if err != nil {
		st := out(PhaseStarting, ReasonProbeFailed, "the self-probe through the gateway failed: %v", err)
		if code != 0 {
			st.Message = fmt.Sprintf("the self-probe through the gateway got %d %s", code, http.StatusText(code))
		}
		st.ProbeStatus = code
		return st
	}
	st := out(PhaseReady, ReasonReady, "the app answered through the gateway (%d)", code)
	st.ProbeStatus = code
	return st
}

// check runs the direct health check at base: http GET base+path judged by
// the app's status rules, or a tcp connect.
func (a *Apps) check(ctx context.Context, s AppSpec, base string) error {
	ctx, cancel := context.WithTimeout(ctx, s.Health.Timeout)
	defer cancel()
	if s.Health.Type == "tcp" {
		hp, err := probeHostPort(base)
		if err != nil {
			return err
		}
		c, err := a.dialer.DialContext(ctx, "tcp", hp)
		if err != nil {
			return fmt.Errorf("tcp check: %w", err)
		}
		_ = c.Close()
		return nil
	}
	target, err := probeURL(base, s.Health.Path, map[string]string{"http": "http", "https": "https"})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	for k, vs := range s.Header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", HealthCheckUserAgent)
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, probeDrainLimit))
	_ = res.Body.Close()
	if !StatusPasses(res.StatusCode, s.API) {
		return fmt.Errorf("health check GET %s: %w", s.Health.Path, probeStatusError(res.StatusCode))
	}
	return nil
}

// HealthCheckUserAgent is the User-Agent of direct health checks.
const HealthCheckUserAgent = "wakegate-health-check"

// StatusPasses applies the route status rules of DESIGN rule 12: 2xx and
// 3xx pass; for API apps 401 and 403 pass too; nothing else does.
func StatusPasses(code int, api bool) bool { return probeStatusPasses(code, api) }

// WaitPhase observes slug until its phase is phase, and returns that
// status. It returns early with an error when the app is failed (unless
// failed is what it waits for), and when budget or ctx runs out. A budget of
// zero is DefaultWaitReady for ready and DefaultWaitStopped otherwise.
// Observations are shared with every other caller (Refresh).
func (a *Apps) WaitPhase(ctx context.Context, slug string, phase Phase, budget time.Duration) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("wait for %s: %w", slug, ErrNoApp)
	}
	if budget <= 0 {
		budget = DefaultWaitStopped
		if phase == PhaseReady {
			budget = DefaultWaitReady
		}
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	for {
		ap.mu.Lock()
		changed := ap.changed
		ap.mu.Unlock()
		st := a.refresh(ctx, ap, time.Now().Add(-ap.spec.MinRefresh))
		switch {
		case st.Phase == phase && !st.Stale:
			return st, nil
		case st.Phase == PhaseFailed && phase != PhaseFailed && !st.Stale:
			return st, fmt.Errorf("wait for %s to be %s: the app failed (%s): %s", slug, phase, st.Reason, st.Message)
		case ctx.Err() != nil:
			return st, fmt.Errorf("wait for %s to be %s: still %s (%s): %w", slug, phase, st.Phase, st.Reason, ctx.Err())
		}
		// Wake on the next stored observation, or observe again after
		// min_refresh, whichever comes first.
		pause.Reset(ap.spec.MinRefresh)
		select {
		case <-changed:
			if !pause.Stop() {
				<-pause.C
			}
		case <-pause.C:
		case <-ctx.Done():
		}
	}
}

// ErrNotHome is returned by operations that need a home-backed app.
var ErrNotHome = errors.New("the app does not run in a home")

// Start sets slug's desired state to running, wakes its home (for a home
// app) and waits until it is ready (budget as WaitPhase). The operation's
// phases are start.wake and start.waitReady.
func (a *Apps) Start(ctx context.Context, slug string, budget time.Duration) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("start %s: %w", slug, ErrNoApp)
	}
	return a.start(ctx, ap, "start", budget)
}

func (a *Apps) start(ctx context.Context, ap *apApp, op string, budget time.Duration) (AppStatus, error) {
	a.setOp(ap, op+".wake", false)
	defer a.setOp(ap, "", false)
	if ap.spec.Home != "" {
		if err := a.o.Engine.Start(ap.spec.Home); err != nil {
			st, _ := a.Status(ap.spec.Slug)
			return st, fmt.Errorf("%s %s: wake home %s: %w", op, ap.spec.Slug, ap.spec.Home, err)
		}
	}
	a.setOp(ap, op+".waitReady", false)
	return a.WaitPhase(ctx, ap.spec.Slug, PhaseReady, budget)
}

// Stop sets slug's desired state to stopped (its route is unpublished at
// the next observation, which it forces), suspends its home (for a home
// app; refused while the home has sessions) and waits until it is stopped.
// The operation's phases are stop.suspend and stop.waitStopped.
func (a *Apps) Stop(ctx context.Context, slug string, budget time.Duration) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("stop %s: %w", slug, ErrNoApp)
	}
	return a.stop(ctx, ap, "stop", budget)
}

func (a *Apps) stop(ctx context.Context, ap *apApp, op string, budget time.Duration) (AppStatus, error) {
	a.setOp(ap, op+".suspend", true)
	defer a.setOp(ap, "", true)
	a.o.Routes.Withdraw(ap.spec.Slug, ReasonStopped)
	if ap.spec.Home != "" {
		if err := a.o.Engine.Suspend(ctx, ap.spec.Home); err != nil {
			st, _ := a.Status(ap.spec.Slug)
			return st, fmt.Errorf("%s %s: suspend home %s: %w", op, ap.spec.Slug, ap.spec.Home, err)
		}
	}
	a.setOp(ap, op+".waitStopped", true)
	return a.WaitPhase(ctx, ap.spec.Slug, PhaseStopped, budget)
}

// Restart stops slug and starts it again; its phases are those of stop and
// start prefixed with "restart." (restart.waitStopped, restart.waitReady).
// budget bounds each half as in WaitPhase.
func (a *Apps) Restart(ctx context.Context, slug string, budget time.Duration) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("restart %s: %w", slug, ErrNoApp)
	}
	if ap.spec.Home == "" {
		return AppStatus{}, fmt.Errorf("restart %s: %w", slug, ErrNotHome)
	}
	if st, err := a.stop(ctx, ap, "restart", budget); err != nil {
		return st, err
	}
	return a.start(ctx, ap, "restart", budget)
}

// setOp records the operation phase and the desired state, and drops the
// stored observation so that the next refresh observes the new intent.
func (a *Apps) setOp(ap *apApp, op string, stopped bool) {
	ap.mu.Lock()
	ap.op = op
	if op != "" {
		ap.stopped = stopped
		ap.stStart = time.Time{}
	}
	ap.mu.Unlock()
}
