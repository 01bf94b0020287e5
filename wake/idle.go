package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Run suspends idle homes and reports this instance's session counts to the
// store until ctx is done. tick is how often homes are checked.
func (e *Engine) Run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.reportSessions(ctx, 3*tick+time.Second)
		for id, h := range *e.homes.Load() {
			if ctx.Err() != nil {
				return
			}
			if !e.idle(h) {
				continue
			}
			if err := e.Suspend(ctx, id); err != nil && !fault.Is(err, fault.Busy) {
				e.o.Log.Warn("idle suspend", "home", id, "err", err)
			}
		}
		e.rlEager(ctx) // roll: eager rolls of idle stale homes (roll.go)
	}
}

func (e *Engine) reportSessions(ctx context.Context, ttl time.Duration) {
	// roll.go keeps the report: rolls subtract it from the fleet's count.
	if err := e.rlReportSessions(ctx, e.o.Sessions.Snapshot(), ttl); err != nil && ctx.Err() == nil {
		e.o.Log.Warn("report sessions", "err", err)
	}
}

// idle reports whether h runs, has no session and has been idle past its
// idle timeout.
func (e *Engine) idle(h *home) bool {
	if h.spec.IdleTimeout <= 0 {
		return false
	}
	h.mu.Lock()
	running := h.status == registry.StatusRunning && h.flight == nil
	h.mu.Unlock()
	if !running {
		return false
	}
	since := e.o.Sessions.IdleSince(h.spec.ID)
	return !since.IsZero() && time.Since(since) >= h.spec.IdleTimeout
}

// Suspend suspends home id (or stops it where the provider cannot suspend)
// unless it has sessions. It holds the home's lifecycle lock throughout; a
// request that arrives meanwhile waits for the lock and wakes it again.
func (e *Engine) Suspend(ctx context.Context, id string) error {
	h := e.home(id)
	if h == nil {
		return errHomeNotFound(id)
	}
	l, err := e.o.Store.Lock(ctx, lockName(id), e.o.Instance, time.Minute)
	if errors.Is(err, registry.ErrLocked) {
		return errBusy(fmt.Errorf("suspend %s: %w", id, err))
	}
	if err != nil {
		return fmt.Errorf("suspend %s: lock: %w", id, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := e.o.Store.Unlock(uctx, l); err != nil {
			e.o.Log.Warn("suspend: unlock", "home", id, "err", err)
		}
	}()
	// Once the lock is held the suspend runs to its end even if the caller
	// goes away (the gateway shutting down): a half-done suspend would leave
	// the record saying "suspending" for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	// The verdict goes first: a request that starts after this point takes
	// the slow path and queues behind the lock. Sessions are checked after
	// it, so a request counted before the drop keeps the home awake.
	h.warm.Store(nil)
	if n := e.o.Sessions.Count(id); n > 0 {
		return errBusy(fmt.Errorf("suspend %s: the home has %d sessions", id, n))
	}
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return fmt.Errorf("suspend %s: %w", id, err)
	}
	if rec.Status != registry.StatusRunning {
		return nil
	}
	start := time.Now()
	// The stopped intent is stored before anything is signalled.
	rec, err = registry.UpdateHome(ctx, e.o.Store, rec, e.o.Instance, func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusSuspending
		r.Verdict = registry.VerdictNone
	})
	if err != nil {
		return fmt.Errorf("suspend %s: %w", id, err)
	}
	e.setStatus(h, rec.Status)
	prov := e.o.Providers[rec.Provider]
	spec := provider.Spec{ID: id, Target: rec.Target, Version: rec.Version, Ref: rec.ProviderRef}
	how := "suspend"
	err = prov.Suspend(ctx, spec)
	proven := err == nil
	if errors.Is(err, provider.ErrUnsupported) {
		how = "stop"
		proven, err = prov.Stop(ctx, spec)
	}
	if err != nil {
		e.o.Log.Error("suspend", "home", id, "how", how, "outcome", "failed", "err", err.Error())
	}
	if _, serr := registry.UpdateHome(ctx, e.o.Store, rec, e.o.Instance, func(r *registry.Home) {
		r.Status = registry.StatusSuspended
	}); serr != nil {
		return fmt.Errorf("suspend %s: %w", id, serr)
	}
	e.setStatus(h, registry.StatusSuspended)
	if err == nil {
		e.o.Log.Info("suspend", "home", id, "how", how, "proven", proven, "ms", ms(time.Since(start)))
		e.o.Events.Publish(Event{Type: EventSuspend, Home: id, Reason: how, TotalMS: ms(time.Since(start))})
	}
	return err
}

func (e *Engine) setStatus(h *home, s registry.Status) {
	h.mu.Lock()
	h.status = s
	h.mu.Unlock()
}

// ProviderChanged is the providers' callback for a home whose process
// changed on its own (restarted after a crash, or given up). The verdict is
// dropped so the next request proves the home again.
func (e *Engine) ProviderChanged(id string, r provider.Result) {
	h := e.home(id)
	if h == nil {
		return
	}
	h.warm.Store(nil)
	if r.State != provider.StateFailed {
		h.mu.Lock()
		if f := h.flight; f != nil {
			select {
			case f.moved <- r:
			default:
			}
		}
		h.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	_, err := registry.UpdateHome(ctx, e.o.Store, registry.Home{ID: id}, e.o.Instance, func(rec *registry.Home) {
		if r.State == provider.StateFailed {
			rec.Status, rec.Reason, rec.Verdict = registry.StatusFailed, r.Reason, registry.VerdictNone
			return
		}
		// Restarted: the new process's endpoint and ref replace the dead
		// one's, so a gateway restart adopts the right process.
		rec.Endpoint, rec.ProviderRef = r.Endpoint, r.Ref
	})
	if err != nil {
		e.o.Log.Warn("record provider change", "home", id, "state", string(r.State), "err", err)
	}
	if r.State == provider.StateFailed {
		e.setStatus(h, registry.StatusFailed)
		e.o.Log.Error("home failed", "home", id, "reason", r.Reason)
		e.o.Events.Publish(Event{Type: EventHomeFailed, Home: id, Message: r.Reason})
	}
}
