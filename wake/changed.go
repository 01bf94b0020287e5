package wake

import (
	"context"

	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
)

// A home's process can change with no operation of the engine asking: its
// provider restarts it after a crash, or gives up on it. ProviderChanged is
// how the provider says so; the wake in flight, the record and the fleet
// learn it here.

// follow hands a restarted process's result to the wake's probe, replacing
// one it has not taken yet.
func follow(f *runState, r provider.Result) {
	select {
	case f.moved <- r:
	default:
		select {
		case <-f.moved:
		default:
		}
		select {
		case f.moved <- r:
		default:
		}
	}
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
	// A wake in flight follows a restarted process. One of a home its
	// provider gave up on ends at once, whatever step it is in, and every
	// caller gets the provider's reason instead of waiting for the ready
	// timeout.
	h.mu.Lock()
	if h.flight != nil {
		run := h.flight.runState
		if r.State == provider.StateFailed {
			if !run.gaveUp(r) {
				// About an older process, or not known yet: the wake
				// goes on and writes its own outcome.
				h.mu.Unlock()
				return
			}
		} else {
			run.ref = r.Ref
			follow(run, r)
		}
	}
	if r.State == provider.StateFailed {
		h.failed = r.Reason
		if h.flight == nil {
			// Given up on after it ran: its restart budget is spent, so
			// requests get the failure until the backoff's next attempt
			// or an operator's start (a wake in flight settles its own).
			h.fails++
			h.limiter.SetLimit(rate.Every(e.failurePause(h.fails)))
			h.limiter.Allow()
		}
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.ctx, providerChangeTimeout)
	defer cancel()
	takenOver, runner := false, ""
	_, err := registry.UpdateHome(ctx, e.o.Store, registry.Home{ID: id}, e.o.Instance, func(rec *registry.Home) {
		takenOver, runner = false, ""
		if e.own.NotRunner(*rec) {
			// Another gateway took the home over, or stopped it (this
			// one's heartbeat ran out): what its process does is that
			// gateway's to record.
			takenOver, runner = true, rec.Runner
			return
		}
		if r.State == provider.StateFailed {
			rec.Status, rec.Reason, rec.Verdict = registry.StatusFailed, r.Reason, registry.VerdictNone
			rec.Runner, rec.RunnerMachine = "", ""
			return
		}
		// Restarted: the new process's endpoint and ref replace the dead
		// one's, so a gateway restart adopts the right process.
		rec.Endpoint, rec.ProviderRef = r.Endpoint, r.Ref
	})
	if err != nil {
		e.o.Log.Warn("record provider change", "home", id, "state", string(r.State), "err", err)
	}
	if takenOver && r.State != provider.StateFailed {
		// The process this gateway's provider just restarted is a copy:
		// the home is another gateway's now. It goes, and this gateway's
		// provider lets the home be.
		e.own.Lease.FencedStops.Add(1)
		e.o.Log.Warn("fleet: the home was taken over by another gateway; stopping the copy restarted here",
			"home", id, "runner", runner)
		if prov, ok := e.o.Providers[h.spec.Provider]; ok {
			spec := h.providerSpec(registry.Home{ProviderRef: r.Ref}, h.spec.Version, rolls.Release{})
			// Not on the provider's goroutine, which waits for this call.
			if e.ctx.Err() != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				sctx, cancel := context.WithTimeout(e.ctx, stopTimeout)
				defer cancel()
				if _, err := prov.Stop(sctx, spec); err != nil {
					e.o.Log.Warn("fleet: stop the copy of a home taken over", "home", id, "err", err)
				}
			}()
		}
		return
	}
	if r.State == provider.StateFailed {
		e.setStatus(h, registry.StatusFailed)
		e.o.Metrics.HomeFailed()
		e.o.Log.Error("home failed", "home", id, "reason", r.Reason)
		e.o.Events.Publish(events.Event{Type: events.HomeFailed, Home: id, Message: r.Reason})
	}
}
