package wake

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// waitPhase observes slug until its phase is phase, and returns that
// status. It returns early with an error when the app is failed (unless
// failed is what it waits for), and when budget or ctx runs out. A budget of
// zero is DefaultWaitReady for ready and DefaultWaitStopped otherwise.
// Observations are shared with every other caller (Refresh).
func (a *Apps) waitPhase(ctx context.Context, slug string, phase Phase, budget time.Duration) (AppStatus, error) {
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
		st := a.refresh(ctx, ap, time.Now().Add(-ap.spec.MinRefresh.Duration()))
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
var ErrNotHome = errors.New("the app does not run in a home")

// Start sets slug's desired state to running, wakes its home (for a home
// app) and waits until it is ready (budget as waitPhase). The operation's
// phases are start.wake and start.waitReady.
func (a *Apps) Start(ctx context.Context, slug string, budget time.Duration) (AppStatus, error) {
	ap := a.app(slug)
	if ap == nil {
		return AppStatus{}, fmt.Errorf("start %s: %w", slug, ErrNoApp)
	}
	return a.start(ctx, ap, "start", budget)
}

func (a *Apps) start(ctx context.Context, ap *observedApp, op string, budget time.Duration) (AppStatus, error) {
	a.setOp(ap, op+".wake", false)
	defer a.setOp(ap, "", false)
	if ap.spec.Home != "" {
		if err := a.o.Engine.Start(ap.spec.Home); err != nil {
			st, _ := a.Status(ap.spec.Slug)
			return st, fmt.Errorf("%s %s: wake home %s: %w", op, ap.spec.Slug, ap.spec.Home, err)
		}
	}
	a.setOp(ap, op+".waitReady", false)
	return a.waitPhase(ctx, ap.spec.Slug, PhaseReady, budget)
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

func (a *Apps) stop(ctx context.Context, ap *observedApp, op string, budget time.Duration) (AppStatus, error) {
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
	return a.waitPhase(ctx, ap.spec.Slug, PhaseStopped, budget)
}

// Restart stops slug and starts it again; its phases are those of stop and
// start prefixed with "restart." (restart.waitStopped, restart.waitReady).
// budget bounds each half as in waitPhase.
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
func (a *Apps) setOp(ap *observedApp, op string, stopped bool) {
	ap.mu.Lock()
	ap.op = op
	if op != "" {
		ap.stopped = stopped
		ap.stStart = time.Time{}
	}
	ap.mu.Unlock()
}
