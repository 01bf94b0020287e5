// Package wake is the lifecycle engine: it makes sure a home is awake before
// a request is forwarded to it (warm verdicts, one coalesced wake per home,
// proven ready by package probe), and suspends homes nobody uses.
//
// DESIGN rules that live here: 1-2 and 4-7 (one wake per home, warm
// verdicts, what a wake records, the hold; rule 3, readiness through the
// real path, and 36 live in package probe, which a wake runs), 8-10
// (rolls and rollback; their options, the brake and the session report a
// roll subtracts live in package rolls), 16 (one lifecycle operation per
// home; idle suspends run on a keyed work queue, package workqueue),
// the engine's side of 18 (a home the provider gave up on, changed.go) and
// of 28 (the wake that forwards to a home's runner and the stop asked of
// it, owner.go; who runs a home, the lease of rule 32 and the heal of a
// store that lost its data live in package ownership), and 11's health
// rung for a wake (a runtime's own health check read before the probe:
// run.go's stepHealth, with provider.AwaitHealth). The app status
// ladder (11-13) lives in package appstatus, which asks the engine through
// a small interface; a refresh from the provider in package refresh, and
// what is told of past and current wakes in package wakerecord. The
// values it answers with (a home's spec, Awake, State) live in package
// homes. A home's running hours (keep-awake windows) are parsed and
// answered by package schedule; the engine holds off idle suspends inside
// a window and wakes the home at a window's start (schedule.go).
package wake

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/idletick"
	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/wakerecord"
)

// SessionCounter reports the live sessions of homes on this instance.
type SessionCounter interface {
	// Count returns the live sessions of a home.
	Count(id string) int
	// IdleSince returns when the home last had no session (zero if it has
	// sessions now).
	IdleSince(id string) time.Time
	// Touch marks the home active now.
	Touch(id string)
	// Snapshot returns the live count of every home with sessions.
	Snapshot() map[string]int
}

// Options configure an Engine. Every duration is filled by the gateway's
// config defaults; the engine does not test them for zero.
type Options struct {
	Store     registry.Store
	Providers map[string]provider.Provider
	Sessions  SessionCounter
	// Instance names this gateway (lock holder, session reports).
	Instance string
	// WarmTTL is how long a proven wake is trusted.
	WarmTTL time.Duration
	// ReadyTimeout bounds one wake, provider start plus probe.
	ReadyTimeout time.Duration
	// RetryAfter is advertised with 503s for homes not ready.
	RetryAfter time.Duration
	// MaxConcurrent caps wakes running at once.
	MaxConcurrent int
	// QueueTimeout is how long a wake waits for a slot under
	// MaxConcurrent before it fails (the gateway passes its callers' own
	// hold, wake.wake_timeout); the ready timeout counts from the slot.
	// Zero, or less than the ready timeout: the ready timeout.
	QueueTimeout time.Duration
	// FailureBackoff is the base pause after a failed wake of a home; it
	// doubles with each failure in a row.
	FailureBackoff time.Duration
	// FailureBackoffMax caps the doubled pause. Zero: no cap short of
	// FailureBackoff doubled 16 times.
	FailureBackoffMax time.Duration
	// Probe is the probe template; Endpoint and Header are set per home,
	// and Kind when the home overrides it. Path is the http probe's path and
	// may contain {target}; a ws probe always upgrades at /node/{target}.
	Probe probe.Spec
	// RelayHeader carries the relay token.
	RelayHeader string
	// Log receives one line per wake and suspend.
	Log *slog.Logger
	// Events receives wake, suspend and failure events; nil publishes none.
	Events *events.Bus
	// Roll configures rolls onto the registered target (roll.go); the zero
	// value turns rolls off.
	Roll rolls.Options
	// Metrics receives the engine's counts where things happen; nil counts
	// nothing.
	Metrics Metrics
	// AdmitWake is asked once for each wake a request would start, under
	// the home's lock: never for a caller that joins the wake in flight,
	// nor for an operator's, a roll's or an adoption's wake. A positive
	// duration refuses the wake (wake_rate_limited, with that Retry-After).
	// Nil admits every wake.
	AdmitWake func(id string) time.Duration
	// Stopped is told, after a suspend or stop of a home went through, the
	// endpoint the home had, so the data plane can close its idle
	// connections there at once. Nil: nothing is told.
	Stopped func(id, endpoint string)
	// OnMissing, when set, is told of a registered home whose stored
	// record a wake found missing (the gateway heals its store). It must
	// return at once.
	OnMissing func(id string)
	// Machine names the machine this gateway runs on (host name and
	// boot), recorded with the homes it runs (package ownership). "" when
	// unknown.
	Machine string
	// Peers is the rest of the fleet, for the ownership of homes whose
	// process lives on one machine (package ownership). Nil: a gateway
	// alone.
	Peers ownership.Peers
	// ProgressEvery is how often a wake that is still running logs one
	// progress line (phase, elapsed time, the probe's last answer). Zero:
	// 5s; negative: never.
	ProgressEvery time.Duration
}

// verdict is a proof that a home was ready; immutable once published.
type verdict struct {
	endpoint *url.URL
	until    time.Duration // expiry, as time since the engine's epoch
}

// home is the engine's in-memory view of one home.
type home struct {
	spec homes.Spec
	warm atomic.Pointer[verdict]

	mu     sync.Mutex
	flight *flight
	// status mirrors the stored status for cheap checks (no-wake rules).
	status registry.Status
	// version mirrors the stored version (record.go).
	version string
	limiter *rate.Limiter
	fails   int
	// failed is the reason its provider gave up on the home, "" when it
	// did not or a wake has succeeded since: a waiting page's poll reports
	// it instead of starting another wake (Start).
	failed string

	// freed is closed when this instance releases the home's lifecycle
	// lock, waking the operations waiting for it; lockedHere is true while
	// an operation of this instance holds it (lifecycle.go).
	freed      chan struct{}
	lockedHere bool
	// lastStop is the stop of the home after its last failed wake.
	lastStop *homes.WakeStop
	// history is the home's last wakes (record.go).
	history wakerecord.History
	// ended is the last wake that ended on this engine, nil before the
	// first; a waiting page reads it (View in record.go).
	ended *wakeEnd

	// waiting counts callers inside EnsureAwake's slow path for this
	// home: they wait for its wake and do not use it yet (roll.go).
	waiting atomic.Int32
	// noRoll is set once the home's provider said it cannot recreate.
	noRoll atomic.Bool
}

// flight is the coalescer's record of the one wake of a home in progress,
// as singleflight's call is: every caller joins it, waits for done (on its
// own context) and then reads res and err, which the run sets once before
// it closes done; joined counts the callers after the first. Nothing is
// cached by the flight: the run records the verdict. The state the run
// keeps while it goes, which its callers, the home's ready signal and the
// provider's callbacks reach through the flight, is the run's own
// (runState).
type flight struct {
	done   chan struct{}
	res    homes.Awake
	err    error
	joined atomic.Int32 // callers that joined after the first
	*runState
}

// Done is closed when the wake ended (homes.Pending).
func (f *flight) Done() <-chan struct{} { return f.done }

// Outcome is how the wake ended, once done is closed (homes.Pending).
func (f *flight) Outcome() (*url.URL, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.res.Endpoint, nil
}

// runState is what one wake's run keeps while it goes and lets others
// reach: its context, its phase, and the signals of the home (ready) and
// of the provider (moved, a give-up) that steer it.
type runState struct {
	ready   chan struct{} // closed by POST /_wakegate/ready
	once    sync.Once
	started time.Time
	phase   atomic.Value // string: "queued", "starting", "probing"
	cause   string       // why it runs: "cold" or "adopt"
	// moved receives the provider's new result when it restarts the home's
	// process during the wake, so the probe follows it.
	moved chan provider.Result
	// ctx is the wake's own context, detached from every caller; abort
	// ends it with a cause (a *gaveUpError when the provider gave up on
	// the home), whatever step the wake is in. runWake owns both.
	ctx   context.Context
	abort context.CancelCauseFunc
	// ref is the provider's handle of the process this wake runs on (set
	// when the provider's wake returns, and again at each restart); woke
	// says the provider's wake has returned. pending holds a give-up that
	// arrived before then: whether it is about this wake's process is
	// known only once the provider says which process that is. All three
	// are guarded by the home's mu.
	ref     string
	woke    bool
	pending *provider.Result
	// early is closed, with earlyAt set, once the home's process was
	// started on a socket that queues connections (provider.Result.Queued):
	// callers of EnsureQueued go at once, their requests waiting in the
	// home's accept queue. The wake itself goes on until its probe passes.
	early     chan struct{}
	earlyAt   *url.URL
	earlyGone atomic.Bool // early was closed
}

// releaseEarly lets the callers of EnsureQueued go to endpoint, once.
func (f *runState) releaseEarly(endpoint *url.URL) {
	if f.earlyGone.CompareAndSwap(false, true) {
		f.earlyAt = endpoint
		close(f.early)
	}
}

func (f *runState) signalReady() { f.once.Do(func() { close(f.ready) }) }

// gaveUp takes a provider's give-up r on the home while f runs, with the
// home's mu held. It ends the wake when r is about the process the wake
// runs on, or names none, and reports whether it did. A give-up about an
// older process (one that failed before this wake started a new one) is
// stale: it must not fail the new wake. One that arrives before the
// provider's wake returns is kept until the wake's process is known.
func (f *runState) gaveUp(r provider.Result) bool {
	switch {
	case r.Ref == "" || (f.woke && r.Ref == f.ref):
		f.abort(&gaveUpError{reason: r.Reason})
		return true
	case !f.woke:
		f.pending = &r
	}
	return false
}

// startedOn records ref, the process the provider's wake returned, with the
// home's mu held, and returns a give-up that arrived before it, if any, for
// the caller to deliver again.
func (f *runState) startedOn(ref string) *provider.Result {
	f.ref, f.woke = ref, true
	p := f.pending
	f.pending = nil
	return p
}

// gaveUpError is the cause of a wake ended because the home's provider
// gave up on it; reason is the provider's (exit status, last log lines).
type gaveUpError struct{ reason string }

func (g *gaveUpError) Error() string { return "the provider gave up on the home: " + g.reason }

// Unwrap makes a gaveUpError match homefault.ErrGaveUp.
func (g *gaveUpError) Unwrap() error { return homefault.ErrGaveUp }

// Engine wakes and suspends homes.
type Engine struct {
	o     Options
	sem   chan struct{}
	homes *homeSet // by id, the awake ones, by relay token (homes.go)

	// epoch anchors verdict expiry on the monotonic clock: time.Since on a
	// monotonic time reads one clock, where time.Now reads two.
	epoch time.Time

	ctx    context.Context // owner of every wake goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup

	counts engineCounts // warm hits and misses, idle ticks (metrics.go)

	idleClock idletick.Clock // the period of Run's idle checks (idle.go)

	roll roller // rolls onto the target (roll.go)

	// refresher refreshes homes from their providers; adopting runs the
	// refreshes of the homes adopted at start (adopt.go).
	refresher *refresh.Refresher
	adopting  *refresh.Queue

	// own answers the fleet's ownership questions of machine-local homes,
	// and keeps this gateway's heartbeat as its lease on the homes it runs
	// (package ownership; owner.go).
	own *ownership.Owner

	// appPaths, when set, names the health paths of the apps inside a
	// home, which an auto probe of the home also tries (UseAppPaths).
	appPaths atomic.Pointer[AppPaths]

	// beatUntil is when this gateway's last heartbeat the store took may
	// lapse, as engine time (stopping.go); 0 before the first, and always
	// outside a fleet.
	beatUntil atomic.Int64
	// nameLost is set once a heartbeat was refused because another run
	// holds this gateway's instance name: that is logged once.
	nameLost atomic.Bool
}

// New returns an Engine. Close it to stop its goroutines.
func New(o Options) *Engine {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	e := &Engine{o: o, sem: make(chan struct{}, o.MaxConcurrent), epoch: time.Now(), homes: newHomeSet()}
	e.roll.e = e
	e.roll.reports.Store, e.roll.reports.Instance = o.Store, o.Instance
	e.own = &ownership.Owner{Peers: o.Peers, Providers: o.Providers, Store: o.Store, Instance: o.Instance,
		Machine: o.Machine, Log: o.Log}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.refresher = &refresh.Refresher{Homes: refreshHomes{e}, Metrics: o.Metrics, Log: o.Log, Events: o.Events}
	e.adopting = refresh.NewQueue(e.ctx, e.refresher, o.Log)
	return e
}

// Close cancels wakes in progress and waits for the engine's goroutines.
func (e *Engine) Close() {
	e.cancel()
	e.adopting.Close()
	e.wg.Wait()
}

// Register makes a home known, creating its stored record if it has none.
// A stored record keeps its state (a home that runs stays running and is
// adopted on its next wake).
func (e *Engine) Register(ctx context.Context, s homes.Spec) error {
	if _, ok := e.o.Providers[s.Provider]; !ok {
		return fmt.Errorf("register home %s: unknown provider %q", s.ID, s.Provider)
	}
	rec, err := e.o.Store.GetHome(ctx, s.ID)
	return e.register(ctx, s, rec, err)
}

// RegisterRead is Register for a caller that has just read the home's
// stored record rec (a restore at start lists every record once): the
// record is not read again, which halves the store reads of a start with
// many homes.
func (e *Engine) RegisterRead(ctx context.Context, s homes.Spec, rec registry.Home) error {
	if _, ok := e.o.Providers[s.Provider]; !ok {
		return fmt.Errorf("register home %s: unknown provider %q", s.ID, s.Provider)
	}
	return e.register(ctx, s, rec, nil)
}

// register is Register once the stored record was read: rec, or err
// (registry.ErrNotFound when there is none).
func (e *Engine) register(ctx context.Context, s homes.Spec, rec registry.Home, err error) error {
	switch {
	case errors.Is(err, registry.ErrNotFound):
		rec, err = e.o.Store.PutHome(ctx, registry.Home{
			ID: s.ID, Target: s.Target, Provider: s.Provider, Version: s.Version,
			Status: registry.StatusSleeping, Owner: e.o.Instance,
		}, registry.Cond{})
		if errors.Is(err, registry.ErrConflict) {
			// Another gateway of the fleet created it a moment before
			// (they started together): its record is this one's.
			rec, err = e.o.Store.GetHome(ctx, s.ID)
		}
		if err != nil {
			return fmt.Errorf("register home %s: %w", s.ID, err)
		}
	case err != nil:
		return fmt.Errorf("register home %s: %w", s.ID, err)
	}
	if rec.Target != s.Target {
		// The config is the source of truth for a home's route. A peer
		// that writes the record meanwhile (its own registration, a
		// wake) leaves the route as it found it: set it again.
		if rec, err = registry.UpdateHome(ctx, e.o.Store, rec, rec.Owner, func(r *registry.Home) { r.Target = s.Target }); err != nil {
			return fmt.Errorf("register home %s: %w", s.ID, err)
		}
	}
	h := &home{spec: s, status: rec.Status, version: rec.Version,
		limiter: rate.NewLimiter(rate.Inf, 1)}
	// A home added at run time (the admin API) with a short idle timeout
	// is checked often enough for it.
	e.idleClock.Shorten(idletick.Need(s.IdleTimeout))
	// The idle clock of a home that may run starts when this gateway
	// learns of it, before the idle loop can see it. One that does not run
	// needs none (the idle loop looks at running homes only, and a wake
	// starts the clock), so a gateway of many sleeping homes keeps no
	// session counter for each.
	if ownership.MayRun(rec.Status) {
		e.o.Sessions.Touch(s.ID)
	}
	e.homes.put(h)
	switch rec.Status {
	case registry.StatusRunning, registry.StatusWaking, registry.StatusRestoring:
		// A home left running by a previous gateway, or in the middle of a
		// wake or a roll (it crashed, or could not record the outcome), is
		// adopted now: by a wake, or by a refresh from its provider's
		// state (adopt.go).
		e.adopt(h, rec.Status)
	case registry.StatusSuspending:
		// A suspend that did not finish (the gateway died, or could not
		// record the outcome) is finished now: its process may still run.
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			ctx, cancel := context.WithTimeout(e.ctx, suspendTimeout)
			defer cancel()
			if err := e.Suspend(ctx, s.ID); err != nil {
				e.o.Log.Warn("finish an interrupted suspend", "home", s.ID, "err", err)
			}
		}()
	}
	return nil
}

// Events returns the engine's event bus (nil when none was configured).
func (e *Engine) Events() *events.Bus { return e.o.Events }

// Changed returns a channel closed at the next change of key, a home's id
// or an app's slug (Bus.Changed; nil when the engine has no bus).
func (e *Engine) Changed(key string) <-chan struct{} { return e.o.Events.Changed(key) }

// HomeState reports home id as stored and as the engine sees it now. It
// starts nothing and changes nothing.
func (e *Engine) HomeState(ctx context.Context, id string) (homes.State, error) {
	h, rec, err := e.homeRecord(ctx, id)
	if err != nil {
		return homes.State{}, err
	}
	s := homes.State{Status: rec.Status, Reason: rec.Reason, Endpoint: rec.Endpoint, StartedAt: rec.LastWakeAt}
	if v := h.warm.Load(); v != nil && e.now() < v.until {
		s.Warm, s.Endpoint = true, endpoint.Record(v.endpoint.String())
	}
	h.mu.Lock()
	s.Waking = h.flight != nil
	h.mu.Unlock()
	s.LastStop = e.LastStop(id)
	return s, nil
}

// HomeHealth returns what the runtime's own health check says of home id
// (rule 11's health rung), where its provider runs one; none otherwise.
func (e *Engine) HomeHealth(ctx context.Context, id string) (provider.Health, error) {
	h, rec, err := e.homeRecord(ctx, id)
	hr, ok := e.o.Providers[rec.Provider].(provider.HealthReporter)
	if err != nil || !ok {
		return provider.Health{}, err
	}
	return hr.Health(ctx, h.providerSpec(rec, rec.Version, e.roll.releases.Of(rec)))
}

// homeRecord returns home id and its stored record.
func (e *Engine) homeRecord(ctx context.Context, id string) (*home, registry.Home, error) {
	h := e.home(id)
	if h == nil {
		return nil, registry.Home{}, fmt.Errorf("home %s: %w", id, registry.ErrNotFound)
	}
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return nil, registry.Home{}, fmt.Errorf("home %s: %w", id, err)
	}
	return h, rec, nil
}

// LastStop returns the stop of home id after its last failed wake, nil when
// no failed wake stopped it since the engine started (or id is unknown).
func (e *Engine) LastStop(id string) *homes.WakeStop {
	h := e.home(id)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastStop == nil {
		return nil
	}
	ls := *h.lastStop
	return &ls
}

// now is the engine's clock for verdicts.
func (e *Engine) now() time.Duration { return time.Since(e.epoch) }

func (e *Engine) home(id string) *home { return e.homes.get(id) }

// Warm reports whether home id has a fresh warm verdict.
func (e *Engine) Warm(id string) bool {
	h := e.home(id)
	if h == nil {
		return false
	}
	v := h.warm.Load()
	return v != nil && e.now() < v.until
}

// WarmAwake returns home id's endpoint when its warm verdict is fresh, as
// EnsureAwake would at once, without a context: the request path asks
// this first and builds the wake's deadline only on a miss.
func (e *Engine) WarmAwake(id string) (homes.Awake, bool) {
	h := e.home(id)
	if h == nil {
		return homes.Awake{}, false
	}
	return e.warmHit(h)
}

// warmHit answers from h's warm verdict when it is fresh, and counts the
// hit.
func (e *Engine) warmHit(h *home) (homes.Awake, bool) {
	if v := h.warm.Load(); v != nil {
		if now := e.now(); now < v.until && e.beatValid(now) {
			e.counts.warmHits.Add(1)
			return homes.Awake{Endpoint: v.endpoint}, true
		}
	}
	return homes.Awake{}, false
}

// Sleeping reports whether home id is known not to run: no fresh verdict
// and a stored status of sleeping, suspended or failed. Requests that must
// not wake a home (no-wake rules) are refused when this is true.
func (e *Engine) Sleeping(id string) bool {
	h := e.home(id)
	if h == nil || e.Warm(id) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.flight != nil {
		return false
	}
	switch h.status {
	case registry.StatusSleeping, registry.StatusSuspended, registry.StatusFailed, registry.StatusSuspending:
		return true
	}
	return false
}

// CauseVerify is the cause of a wake that found its home running (its
// provider started or resumed nothing) and only proved it ready again,
// after its warm verdict expired. It is counted and shown as such, never
// as a cold wake.
const CauseVerify = "verify"

// CauseWaited is the cause of a wake that waited for the home's lock while
// another operation woke the home and proved it ready (another gateway of
// the fleet, most often; or a roll or an operator's wake): its callers
// waited for that wake, but this one started nothing. It is counted and
// shown as such, never as a cold wake, so that a fleet's cold wakes
// summed over its gateways count each start once.
const CauseWaited = "waited"

// EnsureAwake returns the endpoint of home id once it is proven ready. A
// fresh warm verdict answers at once with no store read, provider call or
// probe. Otherwise the caller joins the one wake of the home in flight, or
// starts it; the wake runs detached from the caller, bounded by the ready
// timeout, and every caller waits on its own ctx.
func (e *Engine) EnsureAwake(ctx context.Context, id string) (homes.Awake, error) {
	return e.ensure(ctx, id, false)
}

// ensure is EnsureAwake, or EnsureQueued with queued.
func (e *Engine) ensure(ctx context.Context, id string, queued bool) (homes.Awake, error) {
	h := e.homes.get(id)
	if h == nil {
		return homes.Awake{}, homefault.HomeNotFound(id)
	}
	if a, ok := e.warmHit(h); ok {
		return a, nil
	}
	e.counts.warmMisses.Add(1)
	// Counted before joining, so that the wake this caller starts or joins
	// never takes it for a user of the home (roll.go, roller.busy).
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	return e.wakeNow(ctx, h, "cold", false, queued)
}

// EnsureQueued is EnsureAwake for a caller whose request may wait in the
// home's accept queue: when the home's socket queues connections (socket
// activation), it returns as soon as the home's process was started,
// before its probe passes, so that the request is written while the home
// boots and answered the moment it serves. The wake goes on, and only its
// passing probe sets the verdict. If the wake then fails, the queued
// connections are reset (provider.QueueFailer) and Settled returns the
// wake's error. For any other home it is EnsureAwake.
func (e *Engine) EnsureQueued(ctx context.Context, id string) (homes.Awake, error) {
	return e.ensure(ctx, id, true)
}

// Settled waits for the outcome of the wake that released a early
// (homes.Awake.Queued), for a forward that could not reach the home: the home's
// endpoint once it was proven ready, or the wake's error. For any other a
// it is Redo.
func (e *Engine) Settled(ctx context.Context, id string, a homes.Awake) (*url.URL, error) {
	p := a.Early
	if p == nil {
		return e.Redo(ctx, id)
	}
	select {
	case <-p.Done():
		return p.Outcome()
	case <-ctx.Done():
		return nil, homefault.Waking(e.o.RetryAfter, ctx.Err())
	}
}

// join returns the wake in flight for h, starting one if needed, or a nil
// flight and the fresh verdict found after taking the lock. The verdict is
// returned rather than read again by the caller: a suspend or a failed
// forward may drop it the moment the lock is released. An operator's wake
// is not held by the failure backoff.
func (e *Engine) join(h *home, cause string, operator bool) (*flight, *verdict, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v := h.warm.Load(); v != nil && e.now() < v.until {
		return nil, v, nil
	}
	if h.flight != nil {
		h.flight.joined.Add(1)
		e.o.Metrics.WakeJoined()
		return h.flight, nil, nil
	}
	if e.ctx.Err() != nil {
		return nil, nil, homefault.ShuttingDown(e.o.RetryAfter)
	}
	if err := e.backoff(h, operator); err != nil {
		return nil, nil, err
	}
	if cause == "cold" && !operator && e.o.AdmitWake != nil {
		if d := e.o.AdmitWake(h.spec.ID); d > 0 {
			return nil, nil, homefault.WakeRateLimited(d)
		}
	}
	f := &flight{done: make(chan struct{}), runState: &runState{ready: make(chan struct{}),
		early: make(chan struct{}), started: time.Now(), cause: cause, moved: make(chan provider.Result, 1)}}
	f.ctx, f.abort = context.WithCancelCause(e.ctx)
	f.phase.Store("queued")
	h.flight = f
	e.o.Events.Publish(events.Event{Type: events.WakeStart, Home: h.spec.ID, Cause: f.cause})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.runWake(h, f)
	}()
	return f, nil, nil
}

// backoff refuses a new wake of h while its failure backoff runs: with
// home_failed and the provider's reason when the provider gave up on it,
// wake_backoff otherwise. An operator's wake is never refused. h.mu is
// held.
func (e *Engine) backoff(h *home, operator bool) error {
	if operator {
		return nil
	}
	r := h.limiter.Reserve()
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	// Wakes of this home keep failing: back off.
	r.Cancel()
	if h.failed != "" {
		return homefault.HomeFailed(max(d, minBackoffRetry), h.failed)
	}
	return homefault.Backoff(max(d, minBackoffRetry))
}

// Progress reports the wake in flight for home id: its phase and how long
// it has run. ok is false when no wake is in flight.
func (e *Engine) Progress(id string) (phase string, elapsed time.Duration, ok bool) {
	h := e.home(id)
	if h == nil {
		return "", 0, false
	}
	h.mu.Lock()
	f := h.flight
	h.mu.Unlock()
	if f == nil {
		return "", 0, false
	}
	return f.phase.Load().(string), time.Since(f.started), true
}

// Start keeps the wake of home id going without waiting for it, for the
// waiting page's poll: it joins the wake in flight, or starts one, within
// the failure backoff. A home its provider gave up on is not started:
// home_failed is returned with the reason (a poll never restarts a home
// that keeps exiting; a reload after the backoff, any other request or an
// operator's wake does).
func (e *Engine) Start(id string) error {
	h := e.home(id)
	if h == nil {
		return homefault.HomeNotFound(id)
	}
	h.mu.Lock()
	failed, running := h.failed, h.flight != nil
	h.mu.Unlock()
	if failed != "" && !running {
		return homefault.HomeFailed(e.o.RetryAfter, failed)
	}
	_, _, err := e.join(h, "cold", false)
	return err
}

// Ready ends the readiness wait of home id's wake in flight when token is
// the home's relay token. It reports whether a wake was signalled.
func (e *Engine) Ready(id, token string) bool {
	h := e.home(id)
	if h == nil || h.spec.RelayToken == "" ||
		subtle.ConstantTimeCompare([]byte(token), []byte(h.spec.RelayToken)) != 1 {
		return false
	}
	h.mu.Lock()
	f := h.flight
	h.mu.Unlock()
	if f == nil {
		return false
	}
	f.signalReady()
	return true
}

// HomeForToken returns the id of the home whose relay token is token, for
// POST /_wakegate/ready, comparing in constant time.
func (e *Engine) HomeForToken(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	// The digest finds the candidates; the comparison with each one's
	// secret is still made in constant time.
	for _, id := range e.homes.withToken(token) {
		if h := e.home(id); h != nil && subtle.ConstantTimeCompare([]byte(token), []byte(h.spec.RelayToken)) == 1 {
			return id, true
		}
	}
	return "", false
}

// Drop forgets home id's warm verdict, so the next request proves the home
// again. Called when a forward to it failed, or its process changed.
func (e *Engine) Drop(id string) {
	if h := e.home(id); h != nil {
		h.warm.Store(nil)
	}
}

// Redo drops home id's verdict and wakes it again, for a request whose
// forward found the home unreachable; it returns the fresh endpoint.
func (e *Engine) Redo(ctx context.Context, id string) (*url.URL, error) {
	e.Drop(id)
	a, err := e.EnsureAwake(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.Endpoint, nil
}

func probePath(tmpl, target string) string { return strings.ReplaceAll(tmpl, "{target}", target) }

// parseEndpoint parses a provider's endpoint into the URL the proxy and
// the probes use: a socket endpoint (unix:///path) becomes its stand-in
// http URL (internal/endpoint).
func parseEndpoint(ep string) (*url.URL, error) { return url.Parse(endpoint.HTTP(ep)) }

var _ homes.Pending = (*flight)(nil)
