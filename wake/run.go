package wake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/wakerecord"
)

// wakeRun carries one wake through its steps: a slot under the global cap,
// the home's lifecycle lock (runLocked), the provider, the probe, and the
// record.
type wakeRun struct {
	e     *Engine
	h     *home
	f     *flight
	start time.Time

	*held                    // the lock and the record, once the lock is held
	providerAt time.Duration // time spent in provider.Wake
	probeAt    time.Duration // time spent probing
	probe      probe.Result
	stop       *stopped // the stop of a half-woken home, if there was one
	stopErr    error
	// halfWoken is the provider of a home this wake started, or tried to,
	// and that did not become ready: its callers are released at once and
	// the home is stopped after (stopAfterRelease).
	halfWoken provider.Provider
	released  bool // the callers were released before the stop
	// queueFailed says the home's accept queue was failed for callers
	// released early (failQueued).
	queueFailed bool
	// cannotStart is why the home's program cannot start at all (it does
	// not exist or may not be run), "" otherwise: the home is then failed,
	// not asleep, as when its provider gave up on it.
	cannotStart string
	// progress logs the wake while it runs, with the probe's last failed
	// attempt.
	progress *wakerecord.Progress

	// marking is the record's write saying waking while it is under way
	// (stepMarkWaking); nil once stepProviderWake has waited for it.
	marking *marking

	// What the steps found (wakeSteps): the home's provider, what its
	// wake returned and where the home listens, and the wake's outcome.
	prov     provider.Provider
	woken    provider.Result
	endpoint *url.URL
	out      homes.Awake
}

// runWake is the one wake of h. It owns f and completes it exactly once.
func (e *Engine) runWake(h *home, f *flight) {
	defer f.abort(nil)
	w := &wakeRun{e: e, h: h, f: f, start: f.started}
	w.progress = wakerecord.NewProgress(e.o.Log, h.spec.ID, w.start, e.o.ReadyTimeout, func() string {
		phase, _ := f.phase.Load().(string)
		return phase
	})
	stopProgress := w.progress.Report(f.ctx, e.o.ProgressEvery)
	var res homes.Awake
	settle := func(ctx context.Context, err error) {
		if storeDown(err) && e.ctx.Err() == nil {
			if a, ok := w.fromLocal(ctx); ok {
				res, err = a, nil
			}
		}
		w.settle(res, err)
	}
	// A slot under the global cap on wakes running at once, taken before
	// the lock so that a queued wake holds no lock. The ready timeout
	// bounds the wake itself and starts with its slot: in a storm of wakes
	// a home waits its turn (up to QueueTimeout) and then gets its whole
	// ready timeout, instead of failing for the others' boots.
	queued, cancelQueue := context.WithTimeout(f.ctx, e.queueTimeout(h))
	defer cancelQueue()
	select {
	case e.sem <- struct{}{}:
		ctx, cancel := context.WithTimeout(f.ctx, h.readyTimeout(e))
		_ = e.runLocked(ctx, h, lifecycleOp{name: "wake", wait: true, lease: h.readyTimeout(e) + wakeLeaseSlack,
			run: func(ctx context.Context, l *held) error {
				w.held = l
				var err error
				res, err = w.run(ctx)
				w.stopAfterRelease(ctx, res, err)
				return err
			},
			outcome: func(err error) {
				if w.released {
					w.settleStop()
					return
				}
				settle(ctx, err)
			}})
		cancel()
		<-e.sem
	case <-queued.Done():
		settle(queued, w.timeout("waiting for a wake slot", queued.Err()))
	}
	// The verdict was in place before the lock went, and (unless they went
	// before a stop) the lock is free before the callers go: what they do
	// next finds both settled, and the wake is counted.
	stopProgress()
	w.count(f.err)
	w.record(time.Since(w.start), f.err)
	if !w.released {
		close(f.done)
	}
	w.finish(f.err)
}

// stopAfterRelease ends a wake whose home did not become ready: its callers
// get the wake's error now, at the ready timeout, and only then is the
// half-woken home stopped, under the lock still held and bounded by
// stopTimeout (a hung home can take its whole stop grace and more). The
// stop's outcome is reported with the wake's line, event and metrics, as
// for any failed wake.
func (w *wakeRun) stopAfterRelease(ctx context.Context, res homes.Awake, err error) {
	if w.halfWoken == nil {
		return
	}
	// Callers released early wait in the home's accept queue: they fail
	// first, and ask for the outcome settled next (Engine.Settled).
	w.failQueued(w.halfWoken)
	w.settle(res, err)
	w.released = true
	close(w.f.done)
	w.fail(ctx, w.halfWoken)
}

// count counts the finished wake in the engine's metrics.
func (w *wakeRun) count(err error) {
	m := w.e.o.Metrics
	if err != nil {
		m.WakeDone("failed", w.f.cause, w.providerAt, w.probeAt, time.Since(w.start))
		if w.stop != nil {
			m.WakeStopped(w.stop.proven)
		}
		return
	}
	m.WakeDone("ready", w.f.cause, w.providerAt, w.probeAt, time.Since(w.start))
}

// settle records the wake's outcome in memory, with the lock still held:
// the flight's result, the verdict, the failure backoff.
func (w *wakeRun) settle(res homes.Awake, err error) {
	e, h, f := w.e, w.h, w.f
	// Watchers (a waiting page's stream) look again once h.mu is free:
	// the wake's event comes only after a failed wake's stop.
	defer e.o.Events.Touch(h.spec.ID)
	var gave *gaveUpError
	switch fe, ok := fault.As(err); {
	case err != nil && errors.As(context.Cause(f.ctx), &gave) && (!ok || fe.Code != homefault.CodeRollIncident):
		// The provider gave up on the home: whatever step the wake was
		// in, its callers get the provider's reason. (A failed roll whose
		// rollback failed too stays a roll incident: that is what the
		// operator must act on.)
		err = homefault.HomeFailed(e.o.RetryAfter, gave.reason)
	case err != nil && e.ctx.Err() != nil:
		// The engine closed under the wake: the gateway shuts down.
		sd := homefault.ShuttingDown(e.o.RetryAfter)
		sd.Cause = err
		err = sd
	case errors.Is(err, registry.ErrUnwritable):
		// The gateway's own disk refuses writes: nothing of the home's
		// fault, so (Unavailable) no backoff either.
		err = homefault.StoreUnwritable(e.o.RetryAfter, err)
	case storeDown(err):
		err = homefault.StateUnavailable(e.o.RetryAfter, err)
	case !ok && e.o.OnMissing != nil && errors.Is(err, registry.ErrNotFound) && e.home(h.spec.ID) == h:
		// The record of a home this gateway serves is gone from the
		// fleet's store: it lost its data, or the home was removed on
		// another gateway a moment ago. Neither is the home's failure; the
		// gateway heals the one and forgets the other.
		e.o.OnMissing(h.spec.ID)
		err = homefault.RecordMissing(e.o.RetryAfter, err)
	case err != nil && !ok:
		// A store or provider fault is still a failed wake to a caller,
		// with a Retry-After, not an internal error.
		err = homefault.WakeFailed(e.o.RetryAfter, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w.settleStopLocked()
	f.res, f.err = res, err
	h.ended = &wakeEnd{err: err, took: time.Since(f.started)}
	switch {
	case err == nil:
		h.warm.Store(&verdict{endpoint: res.Endpoint, until: e.now() + e.o.WarmTTL})
		e.setStatusLocked(h, registry.StatusRunning)
		h.fails, h.failed = 0, ""
		h.limiter.SetLimit(rate.Inf)
	case fault.Is(err, fault.ShuttingDown), fault.Is(err, fault.Unavailable), errors.Is(err, errLockWait):
		// Not the home's failure: a store that does not answer, or a lock
		// another operation (here or on another instance) held all along,
		// sets no backoff, and the next request tries again.
	default:
		h.fails++
		switch {
		case gave != nil:
			h.failed = gave.reason
		case w.cannotStart != "":
			h.failed = w.cannotStart
		}
		// After a failure one more wake may start at once; after that each
		// failure in a row doubles the pause between wakes of this home,
		// up to the cap.
		h.limiter.SetLimit(rate.Every(e.failurePause(h.fails)))
		if h.failed != "" {
			// Failed for good (its provider gave up, or its program
			// cannot start): no wake at once; the next is the backoff's,
			// or an operator's.
			h.limiter.Allow()
		}
	}
	h.flight = nil
}

// cannotStart reports whether err, a provider's failure to start a home,
// says that its program cannot start at all: trying again without a change
// would fail the same way.
func cannotStart(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
}

// failurePause is the pause between wakes of a home after fails failures
// in a row: FailureBackoff doubled fails-1 times, at most 16, and at most
// FailureBackoffMax when it is set.
func (e *Engine) failurePause(fails int) time.Duration {
	d := e.o.FailureBackoff << min(fails-1, 16)
	if m := e.o.FailureBackoffMax; m > 0 && d > m {
		d = m
	}
	return d
}

// settleStop records the stop of the half-woken home, for a wake whose
// callers went before it.
func (w *wakeRun) settleStop() {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.settleStopLocked()
}

func (w *wakeRun) settleStopLocked() {
	if w.stop == nil {
		return
	}
	ls := &homes.WakeStop{At: time.Now(), Proven: w.stop.proven}
	if w.stopErr != nil {
		ls.Error = w.stopErr.Error()
	}
	w.h.lastStop = ls
}

// wakeStep is one step of a wake. It returns done when the wake's outcome
// is known without the steps after it (w.out, or err); an error always
// ends the wake.
type wakeStep struct {
	what string // what it does, and the DESIGN rule it serves
	run  func(w *wakeRun, ctx context.Context) (done bool, err error)
}

// wakeSteps are the steps of one wake, in order. They run under the
// home's lifecycle lock, held across the fleet, with the record read after
// it was taken: one wake per home (rule 1), which every caller that
// arrives meanwhile joins (ensure.go).
var wakeSteps = []wakeStep{
	{"trust a proof of ready made by someone else while this wake waited (rule 2)", (*wakeRun).stepProvenByOther},
	{"serve a machine-local home from the gateway that runs it (rule 28)", (*wakeRun).stepViaRunner},
	{"roll a stale home with no users onto the target instead (rules 8, 9)", (*wakeRun).stepRoll},
	{"record the home waking, before anything starts (while a provider.StartGater prepares the start)", (*wakeRun).stepMarkWaking},
	{"ask the provider to wake the home (rule 1)", (*wakeRun).stepProviderWake},
	{"record a new endpoint or ref, never the target (rule 4)", (*wakeRun).stepRecordWhere},
	{"wait for the runtime's own health check, where it runs one (rule 11)", (*wakeRun).stepHealth},
	{"probe through the real serving path (rule 3)", (*wakeRun).stepProbe},
	{"record wake latency, ready time and the verdict healthy (rule 5)", (*wakeRun).stepCommitReady},
}

// run wakes the home, one step after another (wakeSteps); the lifecycle
// lock is held and w.rec was read after it was taken. A failure from the
// provider's wake on is the half-woken home's (w.halfWoken), which
// stopAfterRelease stops (rule 5).
func (w *wakeRun) run(ctx context.Context) (homes.Awake, error) {
	defer w.joinMarking()
	for _, step := range wakeSteps {
		done, err := step.run(w, ctx)
		if err != nil {
			return w.out, err
		}
		if done {
			return w.out, nil
		}
	}
	return w.out, nil
}

// stepProvenByOther: someone else (another instance, or an operation that
// held the lock before this one) proved the home ready within the warm
// TTL: trust it.
func (w *wakeRun) stepProvenByOther(context.Context) (bool, error) {
	a, ok := w.provenByOther()
	if !ok {
		return false, nil
	}
	if w.f.cause == "cold" || w.f.cause == CauseSchedule {
		w.f.cause = CauseWaited
	}
	w.out = a
	return true, nil
}

// stepViaRunner: a machine-local home that another live gateway runs is
// served from that gateway's process, never adopted here (owner.go).
func (w *wakeRun) stepViaRunner(ctx context.Context) (bool, error) {
	a, ok, err := w.viaRunner(ctx)
	if ok || err != nil {
		w.out = a
	}
	return ok, err
}

// stepRoll: a stale home with no users is rolled onto the target instead
// of woken, inside this same flight and lock (roll.go).
func (w *wakeRun) stepRoll(ctx context.Context) (bool, error) {
	w.prov = w.e.o.Providers[w.rec.Provider]
	a, rolled, err := w.e.roll.maybeRoll(ctx, w, w.prov)
	if !rolled {
		return false, nil
	}
	w.out = a
	return true, err
}

// stepMarkWaking records that the home should run and is waking. For a
// provider that waits for it before it starts anything
// (provider.StartGater), the write goes on while the provider prepares the
// start (stepProviderWake): no process starts or resumes before the record
// says waking, and the start does not wait for the write's commit to
// begin its preparations.
func (w *wakeRun) stepMarkWaking(ctx context.Context) (bool, error) {
	mark := func() error {
		return w.save(ctx, func(r *registry.Home) {
			r.WantRunning = true
			r.Status = registry.StatusWaking
		})
	}
	if g, ok := w.prov.(provider.StartGater); ok && g.GatesStart() {
		// The spec is read before the write changes w.rec.
		m := &marking{spec: w.spec(), done: make(chan struct{})}
		go func() {
			defer close(m.done)
			m.err = mark()
		}()
		w.marking = m
		return false, nil
	}
	return false, mark()
}

// marking is the write of a wake's record saying waking, under way while
// its provider prepares the start (stepMarkWaking).
type marking struct {
	spec provider.Spec // what the provider wakes, read before the write
	done chan struct{} // closed when the write ended
	err  error         // the write's error, once done is closed
}

// wait waits for the write to end and returns its error; it is the
// spec's BeforeStart, and may be called any number of times.
func (m *marking) wait() error {
	<-m.done
	return m.err
}

// joinMarking waits for a record write still under way, so that nothing
// of the wake outlives it.
func (w *wakeRun) joinMarking() {
	if w.marking != nil {
		_ = w.marking.wait()
	}
}

// stepProviderWake asks the provider to start or resume the home, and
// reads where it listens.
func (w *wakeRun) stepProviderWake(ctx context.Context) (bool, error) {
	prov := w.prov
	w.setPhase("starting")
	t0 := time.Now()
	var res provider.Result
	var err error
	if m := w.marking; m != nil {
		spec := m.spec
		spec.BeforeStart = m.wait
		res, err = prov.Wake(ctx, spec)
		// The write has ended before w.rec is read again. A failed write
		// is the wake's error, as it would have been before the
		// provider: the provider started and resumed nothing, or (a
		// provider that started without waiting) its start is stopped.
		w.marking = nil
		if merr := m.wait(); merr != nil {
			if err == nil && !res.WasRunning {
				w.halfWoken = prov
			}
			return false, merr
		}
	} else {
		res, err = prov.Wake(ctx, w.spec())
	}
	w.providerAt = time.Since(t0)
	if err != nil {
		w.halfWoken = prov
		w.gaveUpWhileStarting()
		if cannotStart(err) {
			w.cannotStart = homefault.CannotStartReason + err.Error()
		}
		if ctx.Err() != nil {
			return false, w.timeout("starting the home", err)
		}
		return false, homefault.WakeFailed(w.e.o.RetryAfter, err)
	}
	w.woken = res
	if res.WasRunning && (w.f.cause == "cold" || w.f.cause == CauseSchedule) {
		// Nothing was started or resumed: the home ran all along, and
		// this wake only proves it again (its warm verdict had expired).
		w.f.cause = CauseVerify
	}
	w.startedOn(res.Ref)
	endpoint, err := parseEndpoint(res.Endpoint)
	if err != nil || endpoint.Host == "" {
		w.halfWoken = prov
		return false, fmt.Errorf("wake %s: provider returned endpoint %q: %w", w.h.spec.ID, res.Endpoint, err)
	}
	w.endpoint = endpoint
	if res.Queued && !res.WasRunning {
		// Requests may wait in the home's accept queue while it boots:
		// the callers that can (EnsureQueued) go now, before the record
		// of where it runs is written (a failed write stops the home and
		// resets what waits in its queue: fail); the verdict still waits
		// for the probe.
		w.f.releaseEarly(endpoint)
		// The released callers are runnable now, on this processor's
		// queue: let them dial the home and write their requests before
		// this wake goes on to its record and its probe, so that they
		// are first in the home's accept queue and wait for nothing of
		// the wake's.
		runtime.Gosched()
	}
	return false, nil
}

// stepRecordWhere stores a new endpoint or ref; the target never changes.
// A home whose record cannot say where it runs is stopped: a restart
// would not find it.
func (w *wakeRun) stepRecordWhere(ctx context.Context) (bool, error) {
	res := w.woken
	if res.Endpoint == w.rec.Endpoint && res.Ref == w.rec.ProviderRef && w.runner() == w.rec.Runner {
		return false, nil
	}
	if err := w.saveRetry(ctx, func(r *registry.Home) {
		r.Endpoint, r.ProviderRef = res.Endpoint, res.Ref
		w.e.own.SetRunner(r)
	}); err != nil {
		w.fail(ctx, w.prov)
		return false, w.storeFailed("record where the home runs", err)
	}
	return false, nil
}

// stepHealth reads the runtime's own health check of the home, where the
// provider reports one (rule 11's health rung): while a check is still
// unknown the wake waits, showing health-pending; an unhealthy home fails
// the wake, the check's output going to the operator only; healthy, or no
// check, goes on to the probe, which still decides last (rule 3: a
// healthy container whose port does not answer is not ready). Bounded by
// the wake's ready timeout, as the probe is.
func (w *wakeRun) stepHealth(ctx context.Context) (bool, error) {
	hr, ok := w.prov.(provider.HealthReporter)
	if !ok {
		return false, nil
	}
	h, err := provider.AwaitHealth(ctx, hr, w.spec(), func() { w.setPhase(wakerecord.HealthPending) })
	switch {
	case err != nil:
		w.halfWoken = w.prov
		return false, w.timeout("waiting for the runtime's health check", err)
	case h.Status == provider.HealthUnhealthy:
		w.halfWoken = w.prov
		return false, homefault.Unhealthy(w.e.o.RetryAfter, h.Subject, h.Reason)
	}
	return false, nil
}

// stepProbe proves the home ready, following the provider's restarts of
// its process (probeFollowing).
func (w *wakeRun) stepProbe(ctx context.Context) (bool, error) {
	w.setPhase("probing")
	t1 := time.Now()
	var err error
	w.probe, w.endpoint, err = w.probeFollowing(ctx, w.woken.Endpoint, w.endpoint)
	w.probeAt = time.Since(t1)
	if err != nil {
		w.halfWoken = w.prov
		return false, w.timeout("waiting for the home to be ready", err)
	}
	return false, nil
}

// stepCommitReady records the home ready. A home that serves while its
// record says it is waking would be neither suspended nor adopted as
// running: it is stopped instead.
func (w *wakeRun) stepCommitReady(ctx context.Context) (bool, error) {
	if err := w.commitReady(ctx, ""); err != nil {
		w.fail(ctx, w.prov)
		return false, w.storeFailed("record the home ready", err)
	}
	w.out = homes.Awake{Endpoint: w.endpoint}
	return true, nil
}

// storeFailed is the error of a wake that stopped its home because a
// record write failed; the stop it made is in w.stop.
func (w *wakeRun) storeFailed(what string, err error) error {
	proven := w.stop != nil && w.stop.proven
	return homefault.WakeFailed(w.e.o.RetryAfter, fmt.Errorf("%s: %w (the home was stopped; stop proven: %t)", what, err, proven))
}

// provenByOther returns the stored endpoint when the record, read after
// the lock was taken, says that someone else (another instance, while this
// wake waited for the lock) proved the home ready since this wake started,
// within the warm TTL, and that it runs. A proof older than this wake is
// not trusted: the wake may run because a forward found that home gone.
func (w *wakeRun) provenByOther() (homes.Awake, bool) {
	r := w.rec
	if r.Status != registry.StatusRunning || r.Verdict != registry.VerdictHealthy ||
		!r.LastReadyAt.After(w.start) || time.Since(r.LastReadyAt) >= w.e.o.WarmTTL {
		return homes.Awake{}, false
	}
	u, err := parseEndpoint(r.Endpoint)
	if err != nil || u.Host == "" {
		return homes.Awake{}, false
	}
	w.setPhase("proven")
	return homes.Awake{Endpoint: u}, true
}

// recordReady is commitReady for a roll, where a lost write is logged:
// the home runs and is proven.
func (w *wakeRun) recordReady(ctx context.Context, version string, rel rolls.Release) {
	if err := w.commitReadyOn(ctx, version, &rel); err != nil {
		w.e.o.Log.Warn("wake: record ready state", "home", w.h.spec.ID, "version", version, "err", err)
	}
}

// commitReady stores that the home was proven ready (on version, when not
// ""): running, healthy, with the wake's timing, trying the write again
// while ctx lasts.
func (w *wakeRun) commitReady(ctx context.Context, version string) error {
	return w.commitReadyOn(ctx, version, nil)
}

// commitReadyOn is commitReady that also stores rel, when not nil, as
// what version runs from, so that a restarted gateway wakes and rolls
// back the home with it.
func (w *wakeRun) commitReadyOn(ctx context.Context, version string, rel *rolls.Release) error {
	now := time.Now()
	if err := w.saveRetry(ctx, func(r *registry.Home) {
		if version != "" {
			r.Version = version
		}
		if rel != nil {
			r.Command, r.Image = slices.Clone(rel.Command), rel.Image
		}
		r.Status = registry.StatusRunning
		r.Verdict = registry.VerdictHealthy
		r.Reason = ""
		if w.f.cause != CauseVerify {
			r.LastWakeAt = w.start
			r.LastWakeLatency = now.Sub(w.start)
		}
		r.LastReadyAt = now
	}); err != nil {
		return err
	}
	w.e.o.Sessions.Touch(w.h.spec.ID)
	return nil
}

// startedOn records ref, the process the provider's wake or recreate
// returned, as the one this wake runs on. A give-up that arrived while the
// provider was at work is delivered again now that its process is known:
// it either ends this wake or is about an older process and goes.
func (w *wakeRun) startedOn(ref string) {
	w.h.mu.Lock()
	pending := w.f.startedOn(ref)
	w.h.mu.Unlock()
	if pending != nil {
		w.e.ProviderChanged(w.h.spec.ID, *pending)
	}
}

// gaveUpWhileStarting ends the wake with a give-up that arrived while the
// provider's wake ran and then failed: it is about the process that wake
// started (a container that exited at once), so the wake's outcome is the
// provider's reason, as when the give-up comes during the probe.
func (w *wakeRun) gaveUpWhileStarting() {
	w.h.mu.Lock()
	var pending *provider.Result
	if p := w.f.pending; p != nil {
		pending = w.f.startedOn(p.Ref)
	}
	w.h.mu.Unlock()
	if pending != nil {
		w.e.ProviderChanged(w.h.spec.ID, *pending)
	}
}

// probeFollowing probes the home at endpoint. If the provider restarts the
// home's process meanwhile (it exited: a port taken between choosing and
// binding, a crash in boot), the probe moves to the new process instead of
// probing a dead endpoint until the ready timeout; the new endpoint and ref
// are stored. It returns the endpoint that passed. A provider that gives
// up on the home ends ctx (the flight's abort).
func (w *wakeRun) probeFollowing(ctx context.Context, raw string, endpoint *url.URL) (probe.Result, *url.URL, error) {
	for {
		pctx, cancel := context.WithCancel(ctx)
		var next *provider.Result
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case r := <-w.f.moved:
				next = &r
				cancel()
			case <-pctx.Done():
			}
		}()
		res, err := probe.Run(pctx, w.probeSpec(raw), w.f.ready)
		cancel()
		<-watched
		// Moves are bounded by ctx (the ready timeout) and by the
		// provider's restart budget, whose end aborts the flight.
		if err == nil || next == nil || ctx.Err() != nil {
			return res, endpoint, err
		}
		u, perr := parseEndpoint(next.Endpoint)
		if perr != nil || u.Host == "" {
			return res, endpoint, err
		}
		if serr := w.saveRetry(ctx, func(r *registry.Home) {
			r.Endpoint, r.ProviderRef = next.Endpoint, next.Ref
			w.e.own.SetRunner(r)
		}); serr != nil {
			return res, endpoint, serr
		}
		raw, endpoint = next.Endpoint, u
		w.e.o.Log.Info("wake: the home's process was restarted; probing the new one", "home", w.h.spec.ID, "endpoint", raw)
	}
}

// runner is what the record names as the home's runner once this
// gateway's provider started or adopted its process: this gateway for a
// machine-local home in a fleet, "" otherwise.
func (w *wakeRun) runner() string {
	if w.e.own.Local(w.rec.Provider) {
		return w.e.o.Instance
	}
	return ""
}

func (w *wakeRun) spec() provider.Spec {
	return w.h.providerSpec(w.rec, w.rec.Version, w.e.roll.releases.Of(w.rec))
}

// probeSpec is the readiness probe of this home at endpoint, the same for a
// wake, a roll and a rollback.
func (w *wakeRun) probeSpec(endpoint string) probe.Spec {
	e, h := w.e, w.h
	spec := e.o.Probe
	spec.Endpoint = endpoint
	if h.spec.Probe != "" {
		spec.Kind = h.spec.Probe
	}
	if h.spec.ProbePath != "" {
		spec.Path = h.spec.ProbePath
	}
	if len(h.spec.ProbeStatuses) > 0 {
		spec.Statuses = h.spec.ProbeStatuses
	}
	if h.spec.ProbeSettle > 0 {
		spec.Settle = h.spec.ProbeSettle
	}
	spec.Path = probePath(spec.Path, h.spec.Target)
	switch spec.Kind {
	case "", probe.WS: // "" is ws inside Probe
		spec.Path = "/node/" + h.spec.Target
	case probe.Auto:
		spec.WSPath = "/node/" + h.spec.Target
		if p := e.appPaths.Load(); p != nil {
			spec.AltPaths = (*p).HomeProbePaths(h.spec.ID)
		}
	}
	if h.spec.RelayToken != "" {
		spec.Header = http.Header{e.o.RelayHeader: {h.spec.RelayToken}}
	}
	spec.OnAttempt = w.progress.Note
	return spec
}

// fail stops a half-woken home and records that it sleeps, with no
// verdict, or that it failed, with the provider's reason, when the
// provider gave up on it. The stop runs even though the wake's own time
// ran out, and even when the stopped intent cannot be stored (modeAbort).
func (w *wakeRun) fail(ctx context.Context, prov provider.Provider) {
	w.failQueued(prov)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	status, reason := registry.StatusSuspended, "the last wake failed"
	var gave *gaveUpError
	switch {
	case errors.As(context.Cause(w.f.ctx), &gave):
		status, reason = registry.StatusFailed, gave.reason
	case w.cannotStart != "":
		status, reason = registry.StatusFailed, w.cannotStart
	}
	s, err := w.stopHome(sctx, prov, modeAbort, func(r *registry.Home) {
		r.Status = status
		r.Reason = reason
	})
	w.stop, w.stopErr = &s, err
	if err != nil {
		w.e.o.Log.Warn("wake: stop the half-woken home", "home", w.h.spec.ID, "err", err)
	}
}

// failQueued resets the connections waiting in the home's accept queue,
// for a wake that released callers early (EnsureQueued) and failed: their
// forwards end at once, instead of waiting for the home's next process.
func (w *wakeRun) failQueued(prov provider.Provider) {
	if !w.f.earlyGone.Load() || w.queueFailed {
		return
	}
	w.queueFailed = true
	if qf, ok := prov.(provider.QueueFailer); ok {
		if err := qf.FailQueued(w.spec()); err != nil {
			w.e.o.Log.Warn("wake: reset the requests queued for the failed home", "home", w.h.spec.ID, "err", err)
		}
	}
}

func (w *wakeRun) timeout(what string, err error) error {
	if errors.Is(err, probe.ErrNotFound) {
		// The probe gave up before the time ran out: the home serves
		// none of the probed paths (probe/auto.go).
		return homefault.WakeFailed(w.e.o.RetryAfter, fmt.Errorf("%s: %w", what, err))
	}
	return homefault.WakeTimeout(w.e.o.RetryAfter, what, err)
}

// finish writes the one log line and event of this wake.
func (w *wakeRun) finish(err error) {
	e := w.e
	total := time.Since(w.start)
	ev := events.Event{Home: w.h.spec.ID, Cause: w.f.cause, Joined: int(w.f.joined.Load()),
		TotalMS: ms(total), ProviderMS: ms(w.providerAt), ProbeMS: ms(w.probeAt)}
	attrs := []any{
		"home", w.h.spec.ID, "cause", w.f.cause, "joined", w.f.joined.Load(),
		"provider_ms", ms(w.providerAt), "probe_ms", ms(w.probeAt), "total_ms", ms(total),
		"probe_attempts", w.probe.Attempts,
	}
	if w.f.cause == CauseWaited && w.rec.Runner != "" && w.rec.Runner != e.o.Instance {
		attrs = append(attrs, "runner", w.rec.Runner) // the gateway that woke it
	}
	if w.probe.Note != "" {
		attrs = append(attrs, "probe", w.probe.Note)
	}
	if w.probe.Signalled {
		attrs = append(attrs, "ready_signal", true)
		ev.Signalled = true
	}
	if err != nil {
		attrs = append(attrs, "outcome", "failed", "err", err.Error())
		if fe, ok := fault.As(err); ok && fe.Hint != "" {
			attrs = append(attrs, "hint", fe.Hint)
		}
		if w.stop != nil {
			attrs = append(attrs, "stop_proven", w.stop.proven)
			proven := w.stop.proven
			ev.StopProven = &proven
		}
		e.o.Log.Error("wake", attrs...)
		ev.Type, ev.Message = events.WakeFailed, err.Error()
		e.o.Events.Publish(ev)
		return
	}
	attrs = append(attrs, "outcome", "ready")
	e.o.Log.Info("wake", attrs...)
	ev.Type = events.WakeReady
	e.o.Events.Publish(ev)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// setPhase moves the wake to its next phase and wakes the watchers of its
// home (Bus.Changed): phases are not events.
func (w *wakeRun) setPhase(p string) {
	w.f.phase.Store(p)
	w.e.o.Events.Touch(w.h.spec.ID)
}
