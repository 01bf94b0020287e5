package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/schedule"
	"github.com/wakegate/wakegate/stopping"
	"github.com/wakegate/wakegate/workqueue"
)

// Run suspends idle homes and reports this instance's session counts to the
// store until ctx is done. tick is how often homes are checked, until
// SetIdleTick changes it. A tick queues the idle homes on a keyed work
// queue whose workers suspend them, idleWorkers at a time, so that a home
// whose provider is slow to stop delays only itself; Run returns once the
// suspends under way have ended. A tick also starts the wakes of the homes
// whose keep-awake window began since the previous one (schedule.go).
func (e *Engine) Run(ctx context.Context, tick time.Duration) {
	suspends := workqueue.New(ctx, idleWorkers, e.suspendIdle)
	defer suspends.Close()
	e.idleClock.Set(tick)
	tick, changed := e.idleClock.Get()
	t := time.NewTicker(tick)
	defer t.Stop()
	var starts schedule.Starts
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// A reload changed the period: the next check is one new
			// period from now, not at the end of the old one.
			tick, changed = e.idleClock.Get()
			t.Reset(tick)
			continue
		case <-t.C:
		}
		e.reportSessions(ctx, 3*tick+reportSlack)
		// Only homes that run can be idle: a tick costs the awake homes,
		// never all registered ones.
		for _, h := range e.homes.awakeHomes() {
			if e.idle(h) {
				suspends.Add(h.spec.ID)
			}
		}
		e.prewake(&starts)
		e.roll.eager(ctx) // eager rolls of idle stale homes (roll.go)
		e.counts.idleTicks.Add(1)
	}
}

// idleWorkers bounds the idle suspends that run at once.
const idleWorkers = 4

// suspendIdle suspends home id, queued by Run, if it is idle still: a
// request may have come between the tick and the suspend.
func (e *Engine) suspendIdle(ctx context.Context, id string) {
	if h := e.home(id); h == nil || !e.idle(h) {
		return
	}
	if err := e.Suspend(ctx, id); err != nil && !fault.Is(err, fault.Busy) {
		e.o.Log.Warn("idle suspend", "home", id, "err", err)
	}
}

// SetIdleTick changes how often Run checks for idle homes (a reload that
// shortened an idle timeout calls it); Run's next check comes one new
// period later. A period of zero or less is ignored.
func (e *Engine) SetIdleTick(tick time.Duration) {
	if tick > 0 {
		e.idleClock.Set(tick)
	}
}

// IdleTick returns how often Run checks for idle homes (0 before Run).
func (e *Engine) IdleTick() time.Duration {
	tick, _ := e.idleClock.Get()
	return tick
}

// Heartbeat reports this instance's sessions at once, with the TTL Run
// gives its reports when it checks every tick: a gateway of a fleet calls
// it before it serves, so that the fleet knows it alive (Peers.Alive) from
// its first request on.
func (e *Engine) Heartbeat(ctx context.Context, tick time.Duration) {
	e.reportSessions(ctx, 3*tick+reportSlack)
}

func (e *Engine) reportSessions(ctx context.Context, ttl time.Duration) {
	// The roller keeps the report: rolls subtract it from the fleet's count.
	// A disk that refuses writes is logged once per change by the
	// gateway's store watch, not at every report.
	at, sent := e.now(), time.Now()
	err := e.roll.reports.Report(ctx, e.o.Sessions.Snapshot(), ttl)
	if err == nil {
		e.own.Lease.Renewed(sent, ttl)
		e.beatSent(at, ttl)
	}
	switch {
	case err == nil || ctx.Err() != nil || errors.Is(err, registry.ErrUnwritable):
	case errors.Is(err, registry.ErrNameTaken):
		// Every later heartbeat is refused the same way: say it once.
		if e.nameLost.CompareAndSwap(false, true) {
			e.o.Log.Error("fleet: this gateway's heartbeat is refused: another run took over its instance name; the fleet counts this one gone, and it no longer restarts or locks homes",
				"err", err, "hint", "this run was paused or cut off from the store past its heartbeat's TTL while another started under the same name, or two gateways share one name: stop this one, and give each gateway a name of its own")
		}
	default:
		e.o.Log.Warn("report sessions", "err", err)
	}
}

// idle reports whether h runs, has no session, has been idle past its
// idle timeout and is outside its keep-awake windows.
func (e *Engine) idle(h *home) bool {
	return h.spec.IdleTimeout > 0 && e.idleFor(h, h.spec.IdleTimeout) && !inWindow(h)
}

// idleFor reports whether h runs with no wake in flight and has had no
// session for d.
func (e *Engine) idleFor(h *home, d time.Duration) bool {
	h.mu.Lock()
	running := h.status == registry.StatusRunning && h.flight == nil
	h.mu.Unlock()
	if !running {
		return false
	}
	since := e.o.Sessions.IdleSince(h.spec.ID)
	return !since.IsZero() && time.Since(since) >= d
}

// notWaking returns home id for an operation that a wake in flight
// settles itself: fault.NotFound for an unknown home, fault.Busy, with
// busy (a format of the home's id), while a wake of it is in flight.
func (e *Engine) notWaking(id, busy string) (*home, error) {
	h := e.home(id)
	if h == nil {
		return nil, homefault.HomeNotFound(id)
	}
	h.mu.Lock()
	waking := h.flight != nil
	h.mu.Unlock()
	if waking {
		return nil, homefault.Busy(fmt.Errorf(busy, id))
	}
	return h, nil
}

// Suspend suspends home id (or stops it where the provider cannot suspend)
// unless it has sessions (fault.Busy). It holds the home's lifecycle lock
// throughout, and once the lock is held it runs to its end even if ctx
// ends; a request that arrives meanwhile waits for the lock and wakes the
// home again.
func (e *Engine) Suspend(ctx context.Context, id string) error {
	h, err := e.notWaking(id, "suspend %s: a wake of the home is in progress; suspend it once the wake is done")
	if err != nil {
		return err
	}
	return e.runLocked(ctx, h, lifecycleOp{name: "suspend", lease: suspendLease, detach: suspendTimeout,
		run: func(ctx context.Context, l *held) (err error) {
			// The verdict goes first: a request that starts after this
			// point takes the slow path and queues behind the lock.
			// Sessions are checked after it, so a request counted before
			// the drop keeps the home awake.
			giveBack := l.dropVerdict()
			defer func() { giveBack(err) }()
			if n := e.o.Sessions.Count(id); n > 0 {
				return homefault.Busy(fmt.Errorf("suspend %s: the home has %d sessions", id, n))
			}
			if err := e.fleetBusy(ctx, id); err != nil {
				return err
			}
			if !ownership.MayRun(l.rec.Status) {
				return nil // nothing runs: already suspended, asleep or failed
			}
			// The fleet's handshake: the record says stopping, and no
			// gateway admits a new request to the process (package stopping).
			if err := e.quiesce(ctx, l, stopping.Suspend); err != nil {
				return err
			}
			start := time.Now()
			s, err := l.stopHome(ctx, e.o.Providers[l.rec.Provider], modeSuspend, func(r *registry.Home) {
				r.Status = registry.StatusSuspended
			})
			if err != nil {
				e.o.Log.Error("suspend", "home", id, "how", s.how, "outcome", "failed", "err", err.Error())
				return err
			}
			e.o.Metrics.Suspended(s.how)
			e.o.Log.Info("suspend", "home", id, "how", s.how, "proven", s.proven, "ms", ms(time.Since(start)))
			e.o.Events.Publish(events.Event{Type: events.Suspend, Home: id, Reason: s.how, TotalMS: ms(time.Since(start))})
			return nil
		}})
}

func (e *Engine) setStatus(h *home, s registry.Status) {
	h.mu.Lock()
	e.setStatusLocked(h, s)
	h.mu.Unlock()
}

// setStatusLocked mirrors the stored status s in h, and keeps the set of
// awake homes in step; h.mu is held.
func (e *Engine) setStatusLocked(h *home, s registry.Status) {
	if h.status == s {
		return
	}
	h.status = s
	e.homes.statusChanged(h, s)
}
