package wake

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/stopping"
	"github.com/wakegate/wakegate/wakerecord"
)

// The steps of one roll, inside a wake that holds the home's lifecycle lock
// (roll.go says when a home rolls).

// maybeRoll rolls the home instead of waking it when it is due: rolls are
// on, a target is registered, the home has a recorded version that differs,
// the target is not bad, and the home has no users. rolled is false when
// the caller goes on with a plain wake.
func (r *roller) maybeRoll(ctx context.Context, w *wakeRun, prov provider.Provider) (a homes.Awake, rolled bool, err error) {
	e, h := r.e, w.h
	id := h.spec.ID
	t, err := e.o.Store.GetTarget(ctx)
	if errors.Is(err, registry.ErrNotFound) {
		return homes.Awake{}, false, nil
	}
	if err != nil {
		e.o.Log.Warn("roll: read target; waking without a roll", "home", id, "err", err.Error())
		return homes.Awake{}, false, nil
	}
	r.releases.Remember(t)
	if !r.e.o.Roll.On() || !rolls.Stale(w.rec.Version, t) || h.noRoll.Load() {
		return homes.Awake{}, false, nil
	}
	if r.releases.Bad(t) {
		r.stats.SkippedBad.Add(1)
		e.o.Log.Info("roll: target is known bad; waking on the current version",
			"home", id, "version", w.rec.Version, "bad_version", t.Version)
		return homes.Awake{}, false, nil
	}
	if why := r.busy(ctx, w); why != "" {
		r.stats.SkippedBusy.Add(1)
		e.o.Log.Info("roll: home in use; waking without a roll", "home", id,
			"version", w.rec.Version, "target", t.Version, "why", why)
		return homes.Awake{}, false, nil
	}
	a, err = r.roll(ctx, w, prov, t)
	if errors.Is(err, errRollUnsupported) {
		h.noRoll.Store(true)
		return homes.Awake{}, false, nil
	}
	return a, true, err
}

// busy says why the home must not roll now, or "" when it has no users
// (see the rules at the top of roll.go).
func (r *roller) busy(ctx context.Context, w *wakeRun) string {
	id := w.h.spec.ID
	switch w.rec.Status {
	case registry.StatusSleeping, registry.StatusSuspended, registry.StatusFailed:
		return ""
	}
	if n := r.e.o.Sessions.Count(id) - int(w.h.waiting.Load()); n > 0 {
		return fmt.Sprintf("%d session(s) on this instance", n)
	}
	others, err := r.reports.Others(ctx, id)
	if err != nil {
		return "fleet sessions unknown: " + err.Error()
	}
	if others > 0 {
		return fmt.Sprintf("%d session(s) on other instances", others)
	}
	// The reports above may be a second old: the fleet's handshake decides
	// (package stopping), after which no gateway admits a new request to the
	// process the recreate replaces.
	if err := r.e.quiesce(ctx, w.held, stopping.Roll); err != nil {
		return err.Error()
	}
	return ""
}

// roll recreates the home on target t, and on failure records t as bad and
// rolls back to the home's prior version.
func (r *roller) roll(ctx context.Context, w *wakeRun, prov provider.Provider, t registry.Target) (homes.Awake, error) {
	run := w.f.runState
	e := r.e
	id := w.h.spec.ID
	prior := w.rec.Version
	priorRel := r.releases.Of(w.rec)
	w.setPhase("rolling")
	if err := w.save(ctx, func(h *registry.Home) {
		h.WantRunning = true
		h.Status = registry.StatusRestoring
	}); err != nil {
		return homes.Awake{}, err
	}
	r.stats.Started.Add(1)
	e.o.Events.Publish(events.Event{Type: events.RollStart, Home: id, Version: t.Version, PriorVersion: prior, Cause: run.cause})
	e.o.Log.Info("roll", "home", id, "step", "start", "version", t.Version, "prior_version", prior)

	endpoint, err := r.attempt(ctx, w, prov, t.Version, rolls.ReleaseOf(t), run.ready)
	if errors.Is(err, provider.ErrUnsupported) {
		r.stats.Unsupported.Add(1)
		e.o.Log.Warn("roll: the home's provider cannot recreate it; waking without a roll", "home", id)
		e.o.Events.Publish(events.Event{Type: events.RollDone, Home: id, Version: t.Version, PriorVersion: prior,
			Reason: "unsupported", Message: "the provider cannot recreate homes; woken without a roll"})
		return homes.Awake{}, errRollUnsupported
	}
	if err == nil {
		w.recordReady(ctx, t.Version, rolls.ReleaseOf(t))
		r.stats.Rolled.Add(1)
		e.o.Metrics.Rolled("done")
		total := time.Since(w.start)
		e.o.Log.Info("roll", "home", id, "step", "done", "version", t.Version, "prior_version", prior, "total_ms", ms(total))
		e.o.Events.Publish(events.Event{Type: events.RollDone, Home: id, Version: t.Version, PriorVersion: prior,
			Cause: run.cause, TotalMS: ms(total)})
		return homes.Awake{Endpoint: endpoint}, nil
	}

	// The roll failed: the brake comes first, before anything else.
	r.markBad(ctx, t.Version)
	e.o.Log.Warn("roll: failed; target marked bad; rolling back", "home", id, "bad_version", t.Version,
		"prior_version", prior, "err", rollText(err))
	return r.rollBack(ctx, w, prov, t, prior, priorRel, err)
}

// rollBack recreates the home on its prior version after the roll onto t
// failed with rollErr. The rollback has its own budget: the roll may have
// used all of the wake's. If it fails too, the home is stopped and left
// unknown (roll.incident).
func (r *roller) rollBack(ctx context.Context, w *wakeRun, prov provider.Provider, t registry.Target,
	prior string, priorRel rolls.Release, rollErr error) (homes.Awake, error) {
	run := w.f.runState
	e := r.e
	id := w.h.spec.ID
	w.setPhase("rolling back")
	if l, err := e.o.Store.Renew(context.WithoutCancel(ctx), w.lease, w.h.readyTimeout(e)+wakeLeaseSlack); err == nil {
		w.lease = l
	} else {
		e.o.Log.Warn("roll: renew lock for the rollback", "home", id, "err", err.Error())
	}
	rctx, cancel := context.WithTimeout(e.ctx, w.h.readyTimeout(e))
	defer cancel()
	endpoint, rbErr := r.attempt(rctx, w, prov, prior, priorRel, run.ready)
	if rbErr == nil {
		w.recordReady(rctx, prior, priorRel)
		r.stats.RolledBack.Add(1)
		e.o.Metrics.Rolled("rolled_back")
		msg := rollText(rollErr)
		e.o.Log.Error("roll", "alert", events.RollRolledBack, "home", id, "bad_version", t.Version,
			"restored_version", prior, "err", msg, "hint", rolledBackHint(id, t.Version, prior, rollErr))
		e.o.Events.Publish(events.Event{Type: events.RollRolledBack, Home: id, Version: t.Version, PriorVersion: prior, Cause: run.cause,
			Message: "roll to " + t.Version + " failed and was rolled back to " + prior + ": " + msg})
		return homes.Awake{Endpoint: endpoint}, nil
	}
	return r.incident(ctx, w, prov, t, prior, rollErr, rbErr)
}

// incident stops whatever runs after a failed roll and rollback, and
// leaves the home unknown and degraded for a later wake to prove.
func (r *roller) incident(ctx context.Context, w *wakeRun, prov provider.Provider, t registry.Target,
	prior string, rollErr, rbErr error) (homes.Awake, error) {
	run := w.f.runState
	e := r.e
	id := w.h.spec.ID
	msg := "roll: " + rollText(rollErr) + "; rollback: " + rollText(rbErr)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	s, err := w.stopHome(sctx, prov, modeStop, func(h *registry.Home) {
		h.Status = registry.StatusUnknown
		h.Verdict = registry.VerdictDegraded
		h.Reason = "roll to " + t.Version + " and rollback to " + prior + " failed"
	})
	w.stop, w.stopErr = &s, err
	if err != nil {
		e.o.Log.Warn("roll: stop after the incident", "home", id, "err", err.Error())
	}
	r.stats.Incidents.Add(1)
	e.o.Metrics.Rolled("incident")
	fe := homefault.RollIncident(e.o.RetryAfter, errors.New(msg), rbErr)
	e.o.Log.Error("roll", "alert", events.RollIncident, "home", id, "bad_version", t.Version,
		"prior_version", prior, "stop_proven", s.proven, "err", msg, "hint", fe.Hint)
	proven := s.proven
	e.o.Events.Publish(events.Event{Type: events.RollIncident, Home: id, Version: t.Version, PriorVersion: prior, Cause: run.cause,
		StopProven: &proven, Message: "roll to " + t.Version + " and rollback to " + prior + " failed: " + msg})
	return homes.Awake{}, fe
}

// attempt recreates the home on version (from rel; the zero release is
// the provider's defaults), probes it like a wake and asserts the version it
// really runs. The new endpoint and ref are stored at once, so a failure
// after the recreate leaves a record of the process to stop.
func (r *roller) attempt(ctx context.Context, w *wakeRun, prov provider.Provider, version string, rel rolls.Release, ready <-chan struct{}) (*url.URL, error) {
	spec := w.h.providerSpec(w.rec, version, rel)
	t0 := time.Now()
	res, err := prov.Recreate(ctx, spec)
	w.providerAt += time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("recreate on version %s: %w", version, err)
	}
	w.startedOn(res.Ref)
	endpoint, err := parseEndpoint(res.Endpoint)
	if err == nil && endpoint.Host == "" {
		err = errors.New("no host")
	}
	if err != nil {
		return nil, fmt.Errorf("recreate on version %s: provider returned endpoint %q: %w", version, res.Endpoint, err)
	}
	if err := w.save(ctx, func(h *registry.Home) {
		h.Endpoint, h.ProviderRef = res.Endpoint, res.Ref
		w.e.own.SetRunner(h)
	}); err != nil {
		return nil, err
	}
	spec.Ref = res.Ref
	phase, _ := w.f.phase.Load().(string)
	pending := func() { w.setPhase(wakerecord.HealthPending) }
	if err := rolls.Healthy(ctx, prov, spec, pending); err != nil {
		return nil, fmt.Errorf("version %s not healthy: %w", version, err)
	}
	w.setPhase(phase)
	t1 := time.Now()
	w.probe, err = probe.Run(ctx, w.probeSpec(res.Endpoint), ready)
	w.probeAt += time.Since(t1)
	if err != nil {
		return nil, fmt.Errorf("version %s not ready: %w", version, err)
	}
	got, err := prov.Version(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("asking version %s which version it runs: %w", version, err)
	}
	if got != version {
		return nil, &versionMismatch{got: got, want: version}
	}
	if err := rolls.Healthy(ctx, prov, spec, pending); err != nil {
		return nil, fmt.Errorf("version %s not healthy: %w", version, err)
	}
	return endpoint, nil
}

// versionMismatch is a roll's version assert that failed: the home started
// on the target's release reports another version.
type versionMismatch struct{ got, want string }

func (e *versionMismatch) Error() string {
	return fmt.Sprintf("version assert: the home reports version \"%s\", want %q", fault.Excerpt(e.got), e.want)
}

// rolledBackHint is the operator's likely fix after home id's roll onto
// bad failed with err and was rolled back to restored: the brake holds
// until another target is set.
func rolledBackHint(id, bad, restored string, err error) string {
	const brake = "no home rolls onto %s again until another target is set"
	var vm *versionMismatch
	switch {
	case errors.As(err, &vm):
		return fmt.Sprintf("the release started for %s says it is version %q (GET /version on the home, or exec.version_command): "+
			"make the two agree, then set the target again under a new version (wakegate target set VERSION); "+brake,
			bad, fault.Excerpt(vm.got), bad)
	}
	if h := homefault.Hint(err); h != "" {
		return h + "; " + fmt.Sprintf(brake, bad)
	}
	return fmt.Sprintf("the home on %s did not start or pass its probe (wakegate logs %s shows its output); "+
		"fix the release and set it as a new target version, or set the target to %s; "+brake, bad, id, restored, bad)
}

// markBad records version as the target's bad version, unless the target
// moved on meanwhile (a newer target has no brake to set). When the store
// cannot be written the brake is kept in memory for this instance.
func (r *roller) markBad(ctx context.Context, version string) {
	e := r.e
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markBadTimeout)
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
	r.releases.Brake(version)
	e.o.Log.Error("roll: could not record the bad version; braking this instance only",
		"bad_version", version, "err", rollText(err))
}
