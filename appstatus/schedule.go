package appstatus

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/events"
)

// When an app is observed (the gateway's observation loop waits with
// AwaitObservation between two observations):
//
//   - While the app is not ready, every health.interval: a failing app is
//     withdrawn after failure_threshold observations, a starting one is
//     published as soon as its self-probe passes.
//   - While it is ready, the pause doubles after every ready observation
//     in a row (interval, 2×interval, 4×interval, ...) up to
//     health.max_interval: a steady app costs its home a few requests a
//     minute, not one every interval.
//   - A forwarded request the app answered (Pulse.Beat) counts as a
//     passed observation of a ready app: the next active one is due a
//     pause after the last answer, so an app in use is not checked at all.
//   - Any change of the app's home (a wake started, ended or failed, a
//     suspend, a roll) and any observation that is not ready snap the
//     pause back to health.interval and, for a home change, observe at
//     once.

// pulseGrain is how far apart two passive observations must be for the
// second to be stored: under load, the hot path reads the pulse and
// rarely writes it.
const pulseGrain = 100 * time.Millisecond

// unregisteredPause is how long AwaitObservation waits for an app that is
// not registered.
const unregisteredPause = 100 * time.Millisecond

// Pulse records the last time a forwarded request got an answer from
// the app (a passive observation). The request path calls Beat; it takes
// no lock and allocates nothing. The zero value and a nil *Pulse are
// ready to use (nil ignores beats).
type Pulse struct{ at atomic.Int64 } // unix nanoseconds; 0: never

// Beat records that the app answered a forwarded request at at.
func (p *Pulse) Beat(at time.Time) {
	if p == nil {
		return
	}
	n := at.UnixNano()
	if n-p.at.Load() >= int64(pulseGrain) {
		p.at.Store(n)
	}
}

// last returns the last beat (zero when none).
func (p *Pulse) last() time.Time {
	if n := p.at.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// ObserveSchedule is when an app's next active observation is due, and
// why. Operators read it in the admin API; tests read the schedule here
// rather than timing it.
type ObserveSchedule struct {
	// Interval is the pause after the last observation (or passive one).
	Interval time.Duration `json:"interval"`
	// Streak counts ready observations in a row.
	Streak int `json:"streak"`
	// Observations counts the active observations run since the app was
	// registered (health checks and self-probes sent).
	Observations uint64 `json:"observations"`
	// LastObserved is when the last active observation ended (zero: never).
	LastObserved time.Time `json:"last_observed,omitzero"`
	// LastPassive is when a forwarded request last got an answer from the
	// app (zero: never).
	LastPassive time.Time `json:"last_passive,omitzero"`
	// Due is when the next active observation is due.
	Due time.Time `json:"due"`
}

// Schedule returns slug's observation schedule; ok is false for an
// unknown app.
func (a *Apps) Schedule(slug string) (ObserveSchedule, bool) {
	ap := a.app(slug)
	if ap == nil {
		return ObserveSchedule{}, false
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return ap.scheduleLocked(), true
}

// scheduleLocked computes ap's schedule; ap.mu is held.
func (ap *observedApp) scheduleLocked() ObserveSchedule {
	s := ObserveSchedule{Interval: ap.intervalLocked(), Streak: ap.streak, Observations: ap.observations,
		LastObserved: ap.lastObs, LastPassive: ap.pulse.last()}
	from := ap.lastObs
	if ap.st.Phase == PhaseReady && s.LastPassive.After(from) {
		from = s.LastPassive
	}
	if !from.IsZero() {
		s.Due = from.Add(s.Interval)
	}
	return s
}

// intervalLocked is the pause after ap's last observation: the health
// interval (at least min_refresh, which a refresh never observes faster
// than) doubled once per ready observation in a row after the first, up
// to max_interval; ap.mu is held.
func (ap *observedApp) intervalLocked() time.Duration {
	base := max(ap.spec.Health.Interval.Duration(), ap.spec.MinRefresh.Duration())
	top := ap.spec.Health.MaxInterval.Duration()
	d := base
	for i := 1; i < ap.streak && d < top; i++ {
		d *= 2
	}
	return max(base, min(d, top))
}

// noteObservedLocked updates ap's schedule after an active observation
// that ended at end; ap.mu is held.
func (ap *observedApp) noteObservedLocked(end time.Time, ready bool) {
	ap.observations++
	ap.lastObs = end
	if ready {
		ap.streak++
	} else {
		ap.streak = 0
	}
}

// kick snaps ap's pause back to the health interval and has its loop
// observe at once.
func (ap *observedApp) kickNow() {
	ap.mu.Lock()
	ap.streak = 0
	ap.mu.Unlock()
	select {
	case ap.kick <- struct{}{}:
	default:
	}
}

// AwaitObservation waits until slug's next active observation is due (see
// the schedule above) and reports true, or false when ctx ends first. The
// gateway's observation loop calls it between observations.
func (a *Apps) AwaitObservation(ctx context.Context, slug string) bool {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	ap := a.app(slug)
	if ap == nil {
		// Not registered yet (its loop may start a moment before), or
		// removed (its loop is about to be stopped): look again soon.
		t.Reset(unregisteredPause)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		ap.mu.Lock()
		due := ap.scheduleLocked().Due
		ap.mu.Unlock()
		d := time.Until(due)
		if due.IsZero() || d <= 0 {
			return ctx.Err() == nil
		}
		t.Reset(d) // Go 1.23 timers: Reset drops a stale fire
		select {
		case <-ctx.Done():
			return false
		case <-ap.ctx.Done():
			// Replaced or removed: the loop moves on to what is there now.
			return ctx.Err() == nil
		case <-ap.kick:
			return ctx.Err() == nil
		case <-t.C:
			// Due, unless a passive observation moved it: look again.
		}
	}
}

// followHomes kicks the apps of a home whenever its engine publishes an
// event of the home (a wake started, ended or failed, a suspend, a roll),
// until Apps closes. An event dropped for this subscriber only delays the
// kick to the app's next due observation.
func (a *Apps) followHomes(sub *events.Subscription) {
	defer a.wg.Done()
	defer sub.Close()
	for {
		select {
		case <-a.ctx.Done():
			return
		case ev := <-sub.C:
			if ev.Home == "" || ev.App != "" {
				continue
			}
			for _, ap := range a.tab.Load().byslug {
				if ap.spec.Home == ev.Home {
					ap.kickNow()
				}
			}
		}
	}
}
