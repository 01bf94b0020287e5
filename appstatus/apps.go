package appstatus

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
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

// Reason codes of an app's phase, one per rung of the ladder
// (ladder.go).
const (
	ReasonNotObserved      = "not-observed"       // unknown: no observation yet
	ReasonStopped          = "stopped"            // stopped: desired state is stopped
	ReasonRuntimeFailed    = "runtime-failed"     // failed: the home failed
	ReasonRuntimeUnknown   = "runtime-unknown"    // unknown: the home's state is not known or unreadable
	ReasonHomeSleeping     = "home-sleeping"      // starting: the home sleeps; a request wakes it
	ReasonHomeWaking       = "home-waking"        // starting: the home is waking
	ReasonHealthPending    = "health-pending"     // starting: the runtime's own health check has not passed yet
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

// Default budgets of a wait for a phase (Refresh, Start, Stop).
const (
	DefaultWaitReady   = 120 * time.Second
	DefaultWaitStopped = 60 * time.Second
)

// Status is an app's observed status.
type Status struct {
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
	// Hint is the likely fix when the app is held back by a mistake an
	// operator can correct ("" when none). It is for the operator's
	// views (log, admin API, CLI), never for public answers.
	Hint string `json:"hint,omitempty"`
}

// Routes is a gateway instance's route table as app status sees it.
// Implementations are safe for concurrent use.
type Routes interface {
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

// Homes is what the ladder and the operations ask of the lifecycle engine
// about the homes that apps run in. *wake.Engine implements it.
type Homes interface {
	// HomeState returns what the store and the engine know of home id.
	HomeState(ctx context.Context, id string) (homes.State, error)
	// SetRelayHeader adds home id's relay token to hdr, when it has one.
	SetRelayHeader(id string, hdr http.Header)
	// WakeNow wakes home id for an operator (cause names why) and waits
	// for the outcome.
	WakeNow(ctx context.Context, id, cause string) (homes.Awake, error)
	// Suspend suspends home id; it is refused while the home has sessions.
	Suspend(ctx context.Context, id string) error
	// UseAppPaths has the auto probes of homes also try the apps' health
	// paths p names.
	UseAppPaths(p wake.AppPaths)
}

// Options configure Apps.
type Options struct {
	// Homes answers for the runtime of home apps (the lifecycle engine,
	// *wake.Engine). Required when any app has a home.
	Homes Homes
	// Routes is the gateway's route table. Required.
	Routes Routes
	// Events receives app.phase events; nil publishes none.
	Events *events.Bus
	// Log receives phase changes; nil is slog.Default().
	Log *slog.Logger
	// Desired stores an operator's desired state of an app (stopped or
	// running) where it outlives this process and reaches every gateway
	// of a fleet. Start, Stop and Restart call it before they act, and
	// fail when it fails. Nil: the desired state lives in memory only.
	Desired func(ctx context.Context, slug string, stopped bool) error
}

// Apps observes apps: it walks the ladder of checks, keeps each app's last
// status, coalesces and caches refreshes, and runs start, stop and restart.
type Apps struct {
	o      Options
	tab    atomic.Pointer[appSet] // copy on write (runtime.go)
	setMu  sync.Mutex             // serialises changes of tab
	client *http.Client
	tr     *http.Transport
	// dial dials through endpoint.Target (socket endpoints).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	ctx    context.Context // owner of every observation goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// observedApp is one app as Apps observes it: its record, its last
// stored status, the observation in flight and the operation in progress.
type observedApp struct {
	spec registry.App
	// since is when a URL app's runtime counts as started: registration.
	since time.Time
	// ctx ends the app's observations: when the app is removed or
	// replaced, or Apps closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	st      Status
	stStart time.Time // when the stored observation started
	flight  *observation
	fails   int  // failed observations in a row
	stopped bool // desired state
	op      string
	opLock  chan struct{} // held by the operation in progress (ops.go)
	changed chan struct{} // closed and replaced whenever st changes
	phases  phaseHistory  // its last phase changes (history.go)

	// The schedule of its observations (schedule.go).
	streak       int       // ready observations in a row
	observations uint64    // active observations run
	lastObs      time.Time // when the last one ended
	pulse        Pulse     // passive observations: forwarded requests answered
	kick         chan struct{}
}

// observation is one observation of an app in progress; refreshes join
// it, and every joined caller gets its result.
type observation struct {
	start    time.Time
	done     chan struct{}
	st       Status
	timedOut bool
}

// New returns Apps observing no app yet (Put registers them). Close it
// to stop its goroutines.
func New(o Options) *Apps {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	a := &Apps{o: o, dial: endpoint.Dialer(&net.Dialer{})}
	a.tr = &http.Transport{Proxy: nil, DialContext: a.dial, DisableKeepAlives: true, DisableCompression: true}
	a.client = &http.Client{Transport: a.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.tab.Store(&appSet{byslug: map[string]*observedApp{}})
	if o.Homes != nil {
		o.Homes.UseAppPaths(a)
	}
	if o.Events != nil {
		a.wg.Add(1)
		go a.followHomes(o.Events.Subscribe(64))
	}
	return a
}

// Close cancels observations in progress and waits for them.
func (a *Apps) Close() {
	a.cancel()
	a.wg.Wait()
	a.tr.CloseIdleConnections()
}

// Status returns slug's last stored status without observing it.
func (a *Apps) Status(slug string) (Status, bool) {
	ap := a.app(slug)
	if ap == nil {
		return Status{}, false
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return a.current(ap), true
}

// current is ap's stored status with the live route state and operation;
// ap.mu is held.
func (a *Apps) current(ap *observedApp) Status {
	st := ap.st
	if ap.stopped && st.Phase == PhaseUnknown && st.Reason == ReasonNotObserved {
		// Stopped by the operator's stored word before its first
		// observation (a restart): what that observation will say.
		st.Phase, st.Reason, st.Message = PhaseStopped, ReasonStopped, msgStopped
	}
	st.Operation = ap.op
	if rs, ok := a.o.Routes.RouteState(ap.spec.Slug); ok {
		st.Route = rs
	} else {
		st.Route = RouteCandidate
	}
	return st
}

// List returns every app's last stored status, by slug.
func (a *Apps) List() []Status {
	order := a.tab.Load().order
	out := make([]Status, 0, len(order))
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

// SetDesired applies a desired state stored elsewhere (at start, or
// written by another gateway of the fleet) to slug, without running an
// operation: a stop unpublishes the route at once, and either way the next
// observation sees the new intent. It reports whether slug's desired state
// changed.
func (a *Apps) SetDesired(slug string, stopped bool) bool {
	ap := a.app(slug)
	if ap == nil {
		return false
	}
	ap.mu.Lock()
	if ap.stopped == stopped {
		ap.mu.Unlock()
		return false
	}
	ap.stopped = stopped
	ap.stStart = time.Time{}
	ap.mu.Unlock()
	if stopped {
		a.o.Routes.Withdraw(slug, ReasonStopped)
	}
	ap.kickNow()
	return true
}

// ErrNoApp is returned for a slug that names no app.
var ErrNoApp = fault.NewSentinel("no such app", fault.NotFound, "app_not_found", "no such app").Fielded("slug")

// Refresh observes slug unless an observation younger than min_refresh is
// stored, joining the one in flight if any, and returns the status. When
// waitFor is not empty it then waits, as waitPhase with the default
// budget, for that phase.
func (a *Apps) Refresh(ctx context.Context, slug string, waitFor Phase) (Status, error) {
	ap := a.app(slug)
	if ap == nil {
		return Status{}, fmt.Errorf("refresh %s: %w", slug, ErrNoApp)
	}
	st := a.refresh(ctx, ap, time.Now().Add(-ap.spec.MinRefresh.Duration()))
	if waitFor == "" {
		return st, nil
	}
	return a.waitPhase(ctx, slug, waitFor, 0)
}

// RefreshSince returns an observation of slug that started at or after
// since: the stored one if it is recent enough, the one in flight if it
// started late enough, or a new one. Concurrent callers share one
// observation. The observation runs detached from ctx, bounded by
// refresh_timeout; a caller whose ctx ends first, or whose observation ran
// out of time, gets the last stored status marked Stale.
func (a *Apps) RefreshSince(ctx context.Context, slug string, since time.Time) (Status, error) {
	ap := a.app(slug)
	if ap == nil {
		return Status{}, fmt.Errorf("refresh %s: %w", slug, ErrNoApp)
	}
	return a.refresh(ctx, ap, since), nil
}

func (a *Apps) refresh(ctx context.Context, ap *observedApp, since time.Time) Status {
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
			f = &observation{start: time.Now(), done: make(chan struct{})}
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
func (a *Apps) observe(ap *observedApp, f *observation) {
	ctx, cancel := context.WithTimeout(ap.ctx, ap.spec.RefreshTimeout.Duration())
	defer cancel()
	ob := a.ladder(ctx, ap)
	timedOut := ctx.Err() != nil && ob.Phase != PhaseReady

	ap.mu.Lock()
	prev := ap.st
	ap.noteObservedLocked(time.Now(), !timedOut && ob.Phase == PhaseReady)
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
		ap.phases.addLocked(PhaseChange{At: ob.ObservedAt, Phase: ob.Phase, Reason: ob.Reason, Message: ob.Message})
		// Published under the app's lock, so that its events keep the
		// order of what happened to it (a stop's withdrawal comes after).
		a.o.Events.Publish(events.Event{Type: events.AppPhase, App: ap.spec.Slug, Home: ap.spec.Home,
			Phase: string(ob.Phase), Reason: ob.Reason, Message: ob.Message, Time: ob.ObservedAt})
	}
	ap.mu.Unlock()
	close(f.done)
	if changed {
		if ob.Hint != "" {
			a.o.Log.Warn("app phase", "app", ap.spec.Slug, "phase", string(ob.Phase), "reason", ob.Reason, "message", ob.Message, "hint", ob.Hint)
		} else {
			a.o.Log.Info("app phase", "app", ap.spec.Slug, "phase", string(ob.Phase), "reason", ob.Reason, "message", ob.Message)
		}
	}
}
