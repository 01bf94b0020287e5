package appstatus

import (
	"context"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// waitPhase observes slug until its phase is phase, and returns that
// status. It returns early with an error when the app is failed (unless
// failed is what it waits for) or its runtime is unknown, and when budget
// or ctx runs out. A budget of
// zero is DefaultWaitReady for ready and DefaultWaitStopped otherwise.
// Observations are shared with every other caller (Refresh).
func (a *Apps) waitPhase(ctx context.Context, slug string, phase Phase, budget time.Duration) (Status, error) {
	ap := a.app(slug)
	if ap == nil {
		return Status{}, fmt.Errorf("wait for %s: %w", slug, ErrNoApp)
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
		st := a.refresh(ctx, ap, time.Now().Add(-ap.spec.MinRefresh.Duration()))
		switch {
		case st.Phase == phase && !st.Stale:
			return st, nil
		case st.Phase == PhaseFailed && phase != PhaseFailed && !st.Stale:
			return st, fmt.Errorf("wait for %s to be %s: the app failed (%s): %s", slug, phase, st.Reason, st.Message)
		case st.Reason == ReasonRuntimeUnknown && !st.Stale:
			// Only a wake or a roll settles it: waiting would not.
			return st, fmt.Errorf("wait for %s to be %s: its runtime is unknown: %s", slug, phase, st.Message)
		case ctx.Err() != nil:
			return st, fmt.Errorf("wait for %s to be %s: still %s (%s): %w", slug, phase, st.Phase, st.Reason, ctx.Err())
		}
		// Wake on the next stored observation, or observe again after
		// min_refresh, whichever comes first.
		pause.Reset(ap.spec.MinRefresh.Duration())
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
var ErrNotHome = fault.NewSentinel("the app does not run in a home", fault.Invalid, "not_home_app",
	"the app does not run in a home: there is nothing to restart").Fielded("slug")

// An operation on an app is one or two halves (a restart is a stop, then
// a start). A half sets the desired state, acts on the app's home (for a
// home app) and waits for the phase that state leads to. Its phases, shown
// in Status.Operation, are "{operation}.{act}" then "{operation}.{wait}",
// e.g. "start.wake", "start.waitReady", "restart.waitStopped".
type opHalf struct {
	act, wait string // the names of its two phases
	stopped   bool   // the desired state it sets
	phase     Phase  // the phase it waits for
	home      func(ctx context.Context, e Homes, id string) error
}

// startHalf wakes the home and waits for ready. The wake is an
// operator's: a fresh attempt with a fresh restart budget, not held by the
// failure backoff or the wake rate limit, and the half waits for its
// outcome, so a wake that fails ends the operation at once with its cause.
func startHalf() opHalf {
	return opHalf{act: "wake", wait: "waitReady", phase: PhaseReady,
		home: func(ctx context.Context, e Homes, id string) error {
			_, err := e.WakeNow(ctx, id, "app-start")
			return err
		}}
}

// stopHalf suspends the home (refused while it has sessions) and waits for
// stopped.
func stopHalf() opHalf {
	return opHalf{act: "suspend", wait: "waitStopped", stopped: true, phase: PhaseStopped,
		home: func(ctx context.Context, e Homes, id string) error { return e.Suspend(ctx, id) }}
}

// Start sets slug's desired state to running, wakes its home (for a home
// app) and waits until it is ready (budget as waitPhase). The operation's
// phases are start.wake and start.waitReady.
func (a *Apps) Start(ctx context.Context, slug string, budget time.Duration) (Status, error) {
	return a.operate(ctx, slug, "start", budget, startHalf())
}

// Stop sets slug's desired state to stopped (its route is unpublished at
// once, and the next observation, which it forces, sees the stop),
// suspends its home (for a home app; refused while the home has sessions)
// and waits until it is stopped. The operation's phases are stop.suspend
// and stop.waitStopped.
func (a *Apps) Stop(ctx context.Context, slug string, budget time.Duration) (Status, error) {
	return a.operate(ctx, slug, "stop", budget, stopHalf())
}

// Restart stops slug and starts it again; its phases are those of stop and
// start prefixed with "restart." (restart.waitStopped, restart.waitReady).
// budget bounds the whole operation. Only an app inside a home restarts.
func (a *Apps) Restart(ctx context.Context, slug string, budget time.Duration) (Status, error) {
	return a.operate(ctx, slug, "restart", budget, stopHalf(), startHalf())
}

// operate runs the halves of the operation named name on slug, in order,
// and returns the status the last one reached. One operation runs on an
// app at a time: a second one waits for the first to end. budget (zero:
// the default wait of the last half's phase) runs from the call, and
// bounds that wait and every half together.
func (a *Apps) operate(ctx context.Context, slug, name string, budget time.Duration, halves ...opHalf) (Status, error) {
	ap := a.app(slug)
	if ap == nil {
		return Status{}, fmt.Errorf("%s %s: %w", name, slug, ErrNoApp)
	}
	if len(halves) > 1 && ap.spec.Home == "" {
		return Status{}, fmt.Errorf("%s %s: %w", name, slug, ErrNotHome)
	}
	if budget <= 0 {
		budget = DefaultWaitStopped
		if halves[len(halves)-1].phase == PhaseReady {
			budget = DefaultWaitReady
		}
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	select {
	case ap.opLock <- struct{}{}:
		defer func() { <-ap.opLock }()
	case <-ctx.Done():
		st, _ := a.Status(slug)
		return st, fmt.Errorf("%s %s: another operation on the app did not end in time: %w", name, slug, ctx.Err())
	}
	var st Status
	for _, h := range halves {
		var err error
		if st, err = a.runHalf(ctx, ap, name, h); err != nil {
			return st, err
		}
	}
	return st, nil
}

// runHalf runs one half of the operation name on ap.
// ctx carries the operation's deadline, which also ends the wait.
func (a *Apps) runHalf(ctx context.Context, ap *observedApp, name string, h opHalf) (Status, error) {
	slug, home := ap.spec.Slug, ap.spec.Home
	if a.o.Desired != nil {
		if err := a.o.Desired(ctx, slug, h.stopped); err != nil {
			st, _ := a.Status(slug)
			return st, fmt.Errorf("%s %s: store the desired state: %w", name, slug, err)
		}
	}
	a.setOp(ap, name+"."+h.act, h.stopped)
	defer a.setOp(ap, "", h.stopped)
	if h.stopped {
		a.o.Routes.Withdraw(slug, ReasonStopped)
	}
	if home != "" {
		if err := h.home(ctx, a.o.Homes, home); err != nil {
			st, _ := a.Status(slug)
			return st, fmt.Errorf("%s %s: %s home %s: %w", name, slug, h.act, home, err)
		}
	}
	a.setOp(ap, name+"."+h.wait, h.stopped)
	left := time.Second // never zero, which would mean the default
	if d, ok := ctx.Deadline(); ok {
		left = max(time.Until(d), time.Millisecond)
	}
	return a.waitPhase(ctx, slug, h.phase, left)
}

// setOp records the operation phase and the desired state, and drops the
// stored observation so that the next refresh observes the new intent.
func (a *Apps) setOp(ap *observedApp, op string, stopped bool) {
	ap.mu.Lock()
	ap.op = op
	if op != "" {
		ap.stopped = stopped
		ap.stStart = time.Time{}
	}
	ap.mu.Unlock()
}
