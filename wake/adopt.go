package wake

import (
	"context"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
)

// Adoption: a home registered with a stored status that says it runs (the
// gateway restarted, or another gateway of the fleet woke it) is taken
// over in one of two ways, by its provider.
//
//   - A provider of local homes (provider.Quiescer: exec) had them stopped
//     at the last shutdown with their desired state kept, or left them
//     running to be adopted. A wake with cause "adopt" brings each back:
//     it adopts the process that still runs (verifying its identity) or
//     starts it again, and proves it ready. Homes in the middle of a wake
//     or a roll (waking, restoring) are settled the same way for every
//     provider.
//   - Any other provider's homes (docker, fly, http, static) were left as they
//     were: they may have been stopped or suspended out of band while no
//     gateway watched. Each running one is refreshed instead (Refresh with
//     cause "adopt"): the provider's Status is read and the record made to
//     agree, and nothing is started. A home still running is proven by the
//     first request that needs it. The refreshes run in the background, a
//     few at a time (refresh.Queue).

// adopt takes over home h, registered with the stored status st, which
// says it runs or was being woken or rolled (see the top of this file).
func (e *Engine) adopt(h *home, st registry.Status) {
	if _, local := e.o.Providers[h.spec.Provider].(provider.Quiescer); local || st != registry.StatusRunning {
		if _, _, err := e.join(h, "adopt", false); err != nil {
			e.o.Log.Warn("adopt home", "home", h.spec.ID, "err", err)
		}
		return
	}
	e.adopting.Add(h.spec.ID)
}

// Refresh asks home id's provider for the home's state and makes the
// stored record agree (refresh.Refresher.Refresh, cause "admin").
// fault.NotFound for an unknown home, fault.Busy while a wake or another
// operation on the home runs.
func (e *Engine) Refresh(ctx context.Context, id string) (refresh.Result, error) {
	return e.refresher.Refresh(ctx, id, "admin")
}

// refreshHomes is the engine as a refresh asks for its homes
// (refresh.Homes).
type refreshHomes struct{ e *Engine }

// Hold runs fn on home id under its lifecycle lock, unless a wake of the
// home is in flight: that wake records what it finds.
func (r refreshHomes) Hold(ctx context.Context, id string, fn func(context.Context, refresh.Held) error) error {
	e := r.e
	h, err := e.notWaking(id, "refresh %s: a wake of the home is in progress; it records what it finds")
	if err != nil {
		return err
	}
	return e.runLocked(ctx, h, lifecycleOp{name: "refresh", lease: refresh.Lease, detach: refresh.Timeout,
		run: func(ctx context.Context, l *held) error { return fn(ctx, refreshHeld{l}) }})
}

// refreshHeld is a home held for a refresh (refresh.Held).
type refreshHeld struct{ *held }

func (l refreshHeld) ID() string            { return l.h.spec.ID }
func (l refreshHeld) Record() registry.Home { return l.rec }
func (l refreshHeld) MayRun() bool          { return ownership.MayRun(l.rec.Status) }
func (l refreshHeld) DropVerdict() bool     { return l.h.warm.Swap(nil) != nil }
func (l refreshHeld) Touch()                { l.e.o.Sessions.Touch(l.h.spec.ID) }

func (l refreshHeld) Provider() (provider.Provider, provider.Spec, error) {
	prov, ok := l.e.o.Providers[l.rec.Provider]
	if !ok {
		return nil, provider.Spec{}, fmt.Errorf("unknown provider %q", l.rec.Provider)
	}
	return prov, l.h.providerSpec(l.rec, l.rec.Version, l.e.roll.releases.Of(l.rec)), nil
}

func (l refreshHeld) RunnerElsewhere(ctx context.Context) (string, error) {
	return l.e.own.RunnerElsewhere(ctx, l.rec)
}

func (l refreshHeld) Save(ctx context.Context, change func(*registry.Home)) error {
	return l.saveRetry(ctx, change)
}

func (l refreshHeld) SetFailed(reason string) {
	l.h.mu.Lock()
	l.h.failed = reason
	l.h.mu.Unlock()
}

// strayTimeout bounds the end of one home's strays once its lock is held.
const strayTimeout = time.Minute

// EndStrays asks each provider of local homes (provider.StrayEnder) for
// the homes whose processes an earlier run of this gateway left, and ends
// those no stored record names, each under its home's lifecycle lock: a
// run that was killed between a process's start and its record left it
// running, and the home may have been woken elsewhere since. Call it once
// the homes are registered; it returns at once and works in the
// background, bounded by the engine's life. A home that is not
// registered keeps what it holds, with a warning.
func (e *Engine) EndStrays() {
	for name, p := range e.o.Providers {
		se, ok := p.(provider.StrayEnder)
		if !ok {
			continue
		}
		for _, id := range se.Strays() {
			h := e.home(id)
			if h == nil {
				e.o.Log.Warn("processes of a home that is not registered are still running from an earlier run",
					"home", id, "provider", name,
					"hint", "add the home back and stop it, or end its processes by hand")
				continue
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.endStrays(h, se)
			}()
		}
	}
}

// endStrays ends home h's strays through se under h's lifecycle lock,
// keeping the process its record names.
func (e *Engine) endStrays(h *home, se provider.StrayEnder) {
	err := e.runLocked(e.ctx, h, lifecycleOp{name: "end strays", wait: true, lease: suspendLease, detach: strayTimeout,
		run: func(ctx context.Context, l *held) error {
			runner, err := e.own.RunnerElsewhere(ctx, l.rec)
			if err != nil {
				return err
			}
			spec := h.providerSpec(l.rec, l.rec.Version, e.roll.releases.Of(l.rec))
			_, err = se.EndStrays(ctx, spec, runner == "")
			return err
		}})
	if err != nil && e.ctx.Err() == nil {
		e.o.Log.Warn("end the processes an earlier run left", "home", h.spec.ID, "err", err)
	}
}
