package wake

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Rolls move idle homes onto the registered target version (DESIGN.md,
// behaviour 8 to 10).
//
// A roll runs inside a wake flight: the one coalesced flight of the home,
// holding the home's lifecycle lock, so a request that arrives meanwhile
// joins it and a suspend or a second roll waits for it. At wake entry a
// home whose stored version differs from the target's, when the target is
// not the known-bad version and the home has no users, is recreated on the
// target instead of woken: probed like a wake, its running version asserted,
// then endpoint, version and a healthy verdict are committed. The first
// failure records the target as bad (the brake), then the home is recreated
// on its prior version with the same probe and assert.
//
// Which sessions make a home busy (rlBusy):
//   - A home whose stored status says no process runs (sleeping, suspended,
//     failed) has no users: nothing can be connected to it, and every
//     session counted for it, here or on another instance, is a caller
//     waiting for it to wake, queued behind the lock this roll holds. (A
//     suspend refuses a home with sessions, after dropping its verdict, so
//     no request forwarded earlier can still be using it.)
//   - Any other home is busy when this instance counts a session for it
//     that is not a caller inside EnsureAwake's slow path (those wait for
//     this very flight and are served by its result), or when another
//     instance reports sessions for it: FleetSessions minus this instance's
//     own unexpired report. A request counted by the gateway but not yet
//     inside EnsureAwake counts as a user, so the error is always towards
//     not rolling.

// RollMode says when homes roll onto the registered target.
type RollMode string

// Roll modes.
const (
	// RollOff never rolls.
	RollOff RollMode = "off"
	// RollLazy rolls a stale home at its next wake.
	RollLazy RollMode = "lazy"
	// RollEager also rolls awake homes that have had no session for
	// RollOptions.IdleAfter, from the engine's Run loop.
	RollEager RollMode = "eager"
)

// RollOptions configure rolls.
type RollOptions struct {
	// Mode is RollLazy, RollEager or RollOff. The zero value "" is off.
	Mode RollMode
	// IdleAfter is how long an awake home must have had no session before
	// an eager roll; used only with RollEager. Zero rolls it at the first
	// Run tick that finds it idle.
	IdleAfter time.Duration
}

// RollStats counts rolls by outcome since the engine started. Fields are
// read with Load; only the engine adds to them.
type RollStats struct {
	// Started counts rolls begun (the home was marked restoring).
	Started atomic.Uint64
	// Rolled counts rolls committed on the target version.
	Rolled atomic.Uint64
	// RolledBack counts failed rolls whose rollback restored the prior
	// version (alert roll.rolled_back).
	RolledBack atomic.Uint64
	// Incidents counts failed rolls whose rollback failed too (alert
	// roll.incident).
	Incidents atomic.Uint64
	// SkippedBusy counts stale homes woken without a roll because they had
	// users.
	SkippedBusy atomic.Uint64
	// SkippedBad counts stale homes woken on their own version because the
	// target is the known-bad version.
	SkippedBad atomic.Uint64
	// Unsupported counts rolls abandoned because the home's provider cannot
	// recreate homes (the home is then woken as it is, and never rolled).
	Unsupported atomic.Uint64
}

// rlEngine is the engine's roll state.
type rlEngine struct {
	stats RollStats

	mu sync.Mutex
	// commands maps each version seen in a target to its command template
	// (nil: the provider's default), so that a home on a past target's
	// version wakes and rolls back with the command it was started from.
	// It lives in memory: after a restart, a version that is no longer the
	// stored target runs from the provider's default template.
	commands map[string][]string
	// localBad is a target version whose roll failed while the store could
	// not record it; it brakes this instance until a new target is set.
	localBad string

	// reportMu orders this instance's session report against the fleet
	// reads of rlBusy, so that own is always the report FleetSessions sums.
	reportMu sync.Mutex
	own      map[string]int
	ownUntil time.Time
}

// errRollUnsupported means the home's provider cannot recreate homes.
var errRollUnsupported = errors.New("the provider cannot recreate homes")

// RollStats returns the engine's roll counters.
func (e *Engine) RollStats() *RollStats { return &e.roll.stats }

// Target returns the stored roll target; registry.ErrNotFound (wrapped)
// when none is registered.
func (e *Engine) Target(ctx context.Context) (registry.Target, error) {
	t, err := e.o.Store.GetTarget(ctx)
	if err != nil {
		return registry.Target{}, fmt.Errorf("roll target: %w", err)
	}
	e.rlRemember(t)
	return t, nil
}

// SetTarget registers t (Version required; Command, the exec provider's
// command template for that version, nil for the provider's default; Image
// for image-based providers) as the version homes roll onto, and returns
// the stored target. A target equal to the stored one (version, command
// and image) is not written, so it keeps its brake: a gateway restarted on
// the same config does not retry a bad release. Any other target is a new
// release: it is written with a compare-and-set and lifts the brake
// (BadVersion is cleared). t.BadVersion is ignored; the engine records it.
func (e *Engine) SetTarget(ctx context.Context, t registry.Target) (registry.Target, error) {
	if t.Version == "" {
		return registry.Target{}, errors.New("set roll target: version is required")
	}
	if len(t.Command) > 0 && t.Command[0] == "" {
		return registry.Target{}, errors.New("set roll target: command must name a program")
	}
	for attempt := 1; ; attempt++ {
		cur, err := e.o.Store.GetTarget(ctx)
		var cond registry.Cond
		switch {
		case errors.Is(err, registry.ErrNotFound):
		case err != nil:
			return registry.Target{}, fmt.Errorf("set roll target: %w", err)
		case cur.Version == t.Version && cur.Image == t.Image && slices.Equal(cur.Command, t.Command):
			e.rlRemember(cur)
			return cur, nil
		default:
			cond = registry.Cond{Generation: cur.Generation, Owner: cur.Owner}
		}
		next := registry.Target{Version: t.Version, Image: t.Image, Command: slices.Clone(t.Command),
			UpdatedAt: time.Now(), Owner: e.o.Instance}
		stored, err := e.o.Store.PutTarget(ctx, next, cond)
		if errors.Is(err, registry.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return registry.Target{}, fmt.Errorf("set roll target: %w", err)
		}
		e.roll.mu.Lock()
		e.roll.localBad = ""
		e.roll.mu.Unlock()
		e.rlRemember(stored)
		e.o.Log.Info("roll target", "version", stored.Version, "prior_target", cur.Version,
			"image", stored.Image, "custom_command", len(stored.Command) > 0)
		return stored, nil
	}
}

// rlRemember records t's command for its version.
func (e *Engine) rlRemember(t registry.Target) {
	if t.Version == "" {
		return
	}
	e.roll.mu.Lock()
	defer e.roll.mu.Unlock()
	if e.roll.commands == nil {
		e.roll.commands = map[string][]string{}
	}
	e.roll.commands[t.Version] = slices.Clone(t.Command)
}

// rlCommandFor is the command template of version: the one of the target
// that named it, or nil (the provider's default).
func (e *Engine) rlCommandFor(version string) []string {
	e.roll.mu.Lock()
	defer e.roll.mu.Unlock()
	return slices.Clone(e.roll.commands[version])
}

// rlBad reports whether t must not be rolled onto.
func (e *Engine) rlBad(t registry.Target) bool {
	e.roll.mu.Lock()
	defer e.roll.mu.Unlock()
	return t.BadVersion == t.Version || e.roll.localBad == t.Version
}

// rlOn reports whether rolls are enabled.
func (e *Engine) rlOn() bool {
	return e.o.Roll.Mode == RollLazy || e.o.Roll.Mode == RollEager
}

// rlReportSessions reports this instance's sessions to the store and keeps
// the report, which rlBusy subtracts from the fleet's count.
func (e *Engine) rlReportSessions(ctx context.Context, counts map[string]int, ttl time.Duration) error {
	e.roll.reportMu.Lock()
	defer e.roll.reportMu.Unlock()
	if err := e.o.Store.ReportSessions(ctx, e.o.Instance, counts, ttl); err != nil {
		return err
	}
	e.roll.own, e.roll.ownUntil = counts, time.Now().Add(ttl)
	return nil
}

// rlMaybeRoll rolls the home instead of waking it when it is due: rolls
// are on, a target is registered, the home's version differs, the target is
// not bad, and the home has no users. rolled is false when the caller goes
// on with a plain wake.
func (w *wakeRun) rlMaybeRoll(ctx context.Context, prov provider.Provider) (a Awake, rolled bool, err error) {
	e, h := w.e, w.h
	id := h.spec.ID
	t, err := e.o.Store.GetTarget(ctx)
	if errors.Is(err, registry.ErrNotFound) {
		return Awake{}, false, nil
	}
	if err != nil {
		e.o.Log.Warn("roll: read target; waking without a roll", "home", id, "err", err.Error())
		return Awake{}, false, nil
	}
	e.rlRemember(t)
	if !e.rlOn() || t.Version == w.rec.Version || h.rlNoRoll.Load() {
		return Awake{}, false, nil
	}
	if e.rlBad(t) {
		e.roll.stats.SkippedBad.Add(1)
		e.o.Log.Info("roll: target is known bad; waking on the current version",
			"home", id, "version", w.rec.Version, "bad_version", t.Version)
		return Awake{}, false, nil
	}
	if why := w.rlBusy(ctx); why != "" {
		e.roll.stats.SkippedBusy.Add(1)
		e.o.Log.Info("roll: home in use; waking without a roll", "home", id,
			"version", w.rec.Version, "target", t.Version, "why", why)
		return Awake{}, false, nil
	}
	a, err = w.rlRoll(ctx, prov, t)
	if errors.Is(err, errRollUnsupported) {
		h.rlNoRoll.Store(true)
		return Awake{}, false, nil
	}
	return a, true, err
}

// rlBusy says why the home must not roll now, or "" when it has no users
// (see the rules at the top of this file).
func (w *wakeRun) rlBusy(ctx context.Context) string {
	e, h := w.e, w.h
	id := h.spec.ID
	switch w.rec.Status {
	case registry.StatusSleeping, registry.StatusSuspended, registry.StatusFailed:
		return ""
	}
	if n := e.o.Sessions.Count(id) - int(h.rlWaiting.Load()); n > 0 {
		return fmt.Sprintf("%d session(s) on this instance", n)
	}
	others, err := e.rlOthers(ctx, id)
	if err != nil {
		return "fleet sessions unknown: " + err.Error()
	}
	if others > 0 {
		return fmt.Sprintf("%d session(s) on other instances", others)
	}
	return ""
}

// rlOthers returns the sessions other instances report for home id: the
// fleet's count less this instance's own unexpired report.
func (e *Engine) rlOthers(ctx context.Context, id string) (int, error) {
	e.roll.reportMu.Lock()
	defer e.roll.reportMu.Unlock()
	fleet, err := e.o.Store.FleetSessions(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("fleet sessions of %s: %w", id, err)
	}
	if time.Now().Before(e.roll.ownUntil) {
		fleet -= e.roll.own[id]
	}
	return max(fleet, 0), nil
}

// rlRoll recreates the home on target t, and on failure records t as bad
// and rolls back to the home's prior version.
func (w *wakeRun) rlRoll(ctx context.Context, prov provider.Provider, t registry.Target) (Awake, error) {
	e, h := w.e, w.h
	id := h.spec.ID
	prior := w.rec.Version
	priorCmd := e.rlCommandFor(prior)
	w.f.phase.Store("rolling")
	if err := w.save(ctx, func(r *registry.Home) {
		r.WantRunning = true
		r.Status = registry.StatusRestoring
	}); err != nil {
		return Awake{}, err
	}
	e.roll.stats.Started.Add(1)
	e.o.Events.Publish(Event{Type: EventRollStart, Home: id, Version: t.Version, PriorVersion: prior, Cause: w.f.cause})
	e.o.Log.Info("roll", "home", id, "step", "start", "version", t.Version, "prior_version", prior)

	endpoint, err := w.rlAttempt(ctx, prov, t.Version, t.Command, w.f.ready)
	if errors.Is(err, provider.ErrUnsupported) {
		e.roll.stats.Unsupported.Add(1)
		e.o.Log.Warn("roll: the home's provider cannot recreate it; waking without a roll", "home", id)
		e.o.Events.Publish(Event{Type: EventRollDone, Home: id, Version: t.Version, PriorVersion: prior,
			Reason: "unsupported", Message: "the provider cannot recreate homes; woken without a roll"})
		return Awake{}, errRollUnsupported
	}
	if err == nil {
		w.rlCommit(ctx, t.Version)
		e.roll.stats.Rolled.Add(1)
		total := time.Since(w.start)
		e.o.Log.Info("roll", "home", id, "step", "done", "version", t.Version, "prior_version", prior, "total_ms", ms(total))
		e.o.Events.Publish(Event{Type: EventRollDone, Home: id, Version: t.Version, PriorVersion: prior,
			Cause: w.f.cause, TotalMS: ms(total)})
		return Awake{Endpoint: endpoint}, nil
	}

	// The roll failed: the brake comes first, before anything else.
	rollErr := err
	e.rlMarkBad(ctx, t.Version)
	e.o.Log.Warn("roll: failed; target marked bad; rolling back", "home", id, "bad_version", t.Version,
		"prior_version", prior, "err", rlText(rollErr))

	// The rollback has its own budget: the roll may have used all of the
	// wake's. The lease is renewed to cover it.
	w.f.phase.Store("rolling back")
	if l, err := e.o.Store.Renew(context.WithoutCancel(ctx), w.lease, e.o.ReadyTimeout+30*time.Second); err == nil {
		w.lease = l
	} else {
		e.o.Log.Warn("roll: renew lock for the rollback", "home", id, "err", err.Error())
	}
	rctx, cancel := context.WithTimeout(e.ctx, e.o.ReadyTimeout)
	defer cancel()
	ready := w.f.ready
	if probeClosed(ready) {
		ready = nil // a ready signal from the failed version proves nothing
	}
	endpoint, rbErr := w.rlAttempt(rctx, prov, prior, priorCmd, ready)
	if rbErr == nil {
		w.rlCommit(rctx, prior)
		e.roll.stats.RolledBack.Add(1)
		msg := rlText(rollErr)
		e.o.Log.Error("roll", "alert", EventRollRolledBack, "home", id, "bad_version", t.Version,
			"restored_version", prior, "err", msg)
		e.o.Events.Publish(Event{Type: EventRollRolledBack, Home: id, Version: t.Version, PriorVersion: prior, Cause: w.f.cause,
			Message: "roll to " + t.Version + " failed and was rolled back to " + prior + ": " + msg})
		return Awake{Endpoint: endpoint}, nil
	}

	// The rollback failed too: whatever runs is stopped and the home's
	// state is left for a later wake to prove.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer scancel()
	proven, serr := prov.Stop(sctx, w.spec())
	w.stopped, w.stopProven = true, proven && serr == nil
	msg := "roll: " + rlText(rollErr) + "; rollback: " + rlText(rbErr)
	if err := w.save(sctx, func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusUnknown
		r.Verdict = registry.VerdictDegraded
		r.Reason = "roll to " + t.Version + " and rollback to " + prior + " failed"
	}); err != nil {
		e.o.Log.Warn("roll: record incident", "home", id, "err", err.Error())
	}
	e.roll.stats.Incidents.Add(1)
	e.o.Log.Error("roll", "alert", EventRollIncident, "home", id, "bad_version", t.Version,
		"prior_version", prior, "stop_proven", w.stopProven, "err", msg)
	e.o.Events.Publish(Event{Type: EventRollIncident, Home: id, Version: t.Version, PriorVersion: prior, Cause: w.f.cause,
		Message: "roll to " + t.Version + " and rollback to " + prior + " failed: " + msg})
	return Awake{}, errRollIncident(e.o.RetryAfter, errors.New(msg))
}

// rlAttempt recreates the home on version (from command; nil is the
// provider's default), probes it like a wake and asserts the version it
// really runs. The new endpoint and ref are stored at once, so a failure
// after the recreate leaves a record of the process to stop.
func (w *wakeRun) rlAttempt(ctx context.Context, prov provider.Provider, version string, command []string, ready <-chan struct{}) (*url.URL, error) {
	spec := provider.Spec{ID: w.h.spec.ID, Target: w.h.spec.Target, Version: version, Ref: w.rec.ProviderRef, Command: command}
	t0 := time.Now()
	res, err := prov.Recreate(ctx, spec)
	w.providerAt += time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("recreate on version %s: %w", version, err)
	}
	endpoint, err := url.Parse(res.Endpoint)
	if err == nil && endpoint.Host == "" {
		err = errors.New("no host")
	}
	if err != nil {
		return nil, fmt.Errorf("recreate on version %s: provider returned endpoint %q: %w", version, res.Endpoint, err)
	}
	if err := w.save(ctx, func(r *registry.Home) {
		r.Endpoint, r.ProviderRef = res.Endpoint, res.Ref
	}); err != nil {
		return nil, err
	}
	t1 := time.Now()
	w.probe, err = Probe(ctx, w.probeSpec(res.Endpoint), ready)
	w.probeAt += time.Since(t1)
	if err != nil {
		return nil, fmt.Errorf("version %s not ready: %w", version, err)
	}
	spec.Ref = res.Ref
	got, err := prov.Version(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("asking version %s which version it runs: %w", version, err)
	}
	if got != version {
		return nil, fmt.Errorf("version assert: the home reports version %q, want %q", got, version)
	}
	return endpoint, nil
}

// rlCommit stores the version the home was proven to run, with a healthy
// verdict. A lost write is logged: the home runs and is proven.
func (w *wakeRun) rlCommit(ctx context.Context, version string) {
	now := time.Now()
	if err := w.save(ctx, func(r *registry.Home) {
		r.Version = version
		r.Status = registry.StatusRunning
		r.Verdict = registry.VerdictHealthy
		r.Reason = ""
		r.LastWakeAt = w.start
		r.LastWakeLatency = now.Sub(w.start)
		r.LastReadyAt = now
	}); err != nil {
		w.e.o.Log.Warn("roll: record rolled home", "home", w.h.spec.ID, "version", version, "err", err.Error())
	}
	w.e.o.Sessions.Touch(w.h.spec.ID)
}

// rlMarkBad records version as the target's bad version, unless the target
// moved on meanwhile (a newer target has no brake to set). When the store
// cannot be written the brake is kept in memory for this instance.
func (e *Engine) rlMarkBad(ctx context.Context, version string) {
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		var cur registry.Target
		if cur, err = e.o.Store.GetTarget(mctx); err != nil {
			break
		}
		if cur.Version != version || cur.BadVersion == version {
			return
		}
		next := cur
		next.BadVersion, next.Owner, next.UpdatedAt = version, e.o.Instance, time.Now()
		if _, err = e.o.Store.PutTarget(mctx, next, registry.Cond{Generation: cur.Generation, Owner: cur.Owner}); err == nil {
			return
		}
		if !errors.Is(err, registry.ErrConflict) {
			break
		}
	}
	e.roll.mu.Lock()
	e.roll.localBad = version
	e.roll.mu.Unlock()
	e.o.Log.Error("roll: could not record the bad version; braking this instance only",
		"bad_version", version, "err", rlText(err))
}

// rlEager starts a roll of every awake home that is stale and has had no
// session for IdleAfter (RollEager only). The home's verdict is dropped
// first, so a request from then on joins the roll's flight; the flight
// checks for users again once it holds the lock.
func (e *Engine) rlEager(ctx context.Context) {
	if e.o.Roll.Mode != RollEager {
		return
	}
	t, err := e.o.Store.GetTarget(ctx)
	if err != nil {
		if !errors.Is(err, registry.ErrNotFound) && ctx.Err() == nil {
			e.o.Log.Warn("roll: read target", "err", err.Error())
		}
		return
	}
	if e.rlBad(t) {
		return
	}
	for id, h := range *e.homes.Load() {
		if ctx.Err() != nil || h.rlNoRoll.Load() {
			continue
		}
		h.mu.Lock()
		running := h.status == registry.StatusRunning && h.flight == nil
		h.mu.Unlock()
		if !running {
			continue
		}
		since := e.o.Sessions.IdleSince(id)
		if since.IsZero() || time.Since(since) < e.o.Roll.IdleAfter {
			continue
		}
		rec, err := e.o.Store.GetHome(ctx, id)
		if err != nil || rec.Version == t.Version {
			continue
		}
		if n, err := e.rlOthers(ctx, id); err != nil || n > 0 {
			continue // in use elsewhere: no pointless wake every tick
		}
		h.warm.Store(nil)
		if _, _, err := e.join(h, "roll"); err != nil {
			e.o.Log.Info("roll: eager roll not started", "home", id, "err", err.Error())
		}
	}
}

// rlText is err as readable text for alerts: never empty.
func rlText(err error) string {
	if err == nil || err.Error() == "" {
		return "unknown error"
	}
	return err.Error()
}

// Roll rolls home id onto the target now, on an operator's request, and
// waits for it on ctx. The home's verdict is dropped so the request goes
// through the one wake path, where the usual rules decide: a home with
// sessions, a home already on the target, a missing or bad target are
// refused with a 409 Error that says which.
func (e *Engine) Roll(ctx context.Context, id string) (registry.Home, error) {
	h := e.home(id)
	if h == nil {
		return registry.Home{}, errHomeNotFound(id)
	}
	refuse := func(code, msg string) (registry.Home, error) {
		return registry.Home{}, errRefused(code, msg)
	}
	if !e.rlOn() {
		return refuse("roll_off", "rolls are off (roll.mode: off)")
	}
	t, err := e.o.Store.GetTarget(ctx)
	if errors.Is(err, registry.ErrNotFound) {
		return refuse("no_target", "no target version is registered")
	}
	if err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if e.rlBad(t) {
		return refuse("target_bad", "target version "+t.Version+" failed a roll; register a newer one")
	}
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if rec.Version == t.Version {
		return refuse("roll_not_needed", "the home already runs version "+t.Version)
	}
	if n := e.o.Sessions.Count(id); n > 0 {
		return registry.Home{}, errBusy(fmt.Errorf("roll %s: the home has %d session(s); it rolls once they end", id, n))
	}
	h.warm.Store(nil)
	if _, err := e.WakeNow(ctx, id, "roll"); err != nil {
		return registry.Home{}, err
	}
	if rec, err = e.o.Store.GetHome(ctx, id); err != nil {
		return registry.Home{}, fmt.Errorf("roll %s: %w", id, err)
	}
	if rec.Version != t.Version {
		return registry.Home{}, errBusy(fmt.Errorf("roll %s: the home was woken but not rolled: it is in use", id))
	}
	return rec, nil
}
