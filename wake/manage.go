package wake

import (
	"context"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
)

// Known reports whether home id is registered.
func (e *Engine) Known(id string) bool { return e.home(id) != nil }

// WakeNow wakes home id on an operator's request and waits for it on ctx:
// it joins a wake in flight or starts one whose events carry cause. A home
// with a fresh verdict answers at once. An operator's wake is not held by
// the home's failure backoff, and it resets the provider's restart budget
// of the home, so a home given up on after too many crashes (and fixed
// since) gets its full budget again.
func (e *Engine) WakeNow(ctx context.Context, id, cause string) (homes.Awake, error) {
	h, err := e.operatorHome(id)
	if err != nil {
		return homes.Awake{}, err
	}
	return e.wakeNow(ctx, h, cause, true, false)
}

// StartNow is WakeNow without the wait: it starts (or joins) the wake of
// home id on an operator's request and returns at once.
func (e *Engine) StartNow(id, cause string) error {
	h, err := e.operatorHome(id)
	if err != nil {
		return err
	}
	_, _, err = e.join(h, cause, true)
	return err
}

// operatorHome returns home id for an operator's wake, with its restart
// budget reset.
func (e *Engine) operatorHome(id string) (*home, error) {
	h := e.home(id)
	if h == nil {
		return nil, homefault.HomeNotFound(id)
	}
	if r, ok := e.o.Providers[h.spec.Provider].(provider.BudgetResetter); ok {
		r.ResetBudget(id)
	}
	return h, nil
}

// wakeNow joins or starts the wake of h and waits for it on ctx. A fresh
// verdict found once the flight lock is held answers at once (the verdict
// is returned by join rather than read again: a suspend or a failed
// forward may drop it the moment the lock is released). With queued, the
// caller goes as soon as the wake releases its early callers
// (EnsureQueued).
func (e *Engine) wakeNow(ctx context.Context, h *home, cause string, operator, queued bool) (homes.Awake, error) {
	start := time.Now()
	f, v, err := e.join(h, cause, operator)
	if err != nil {
		return homes.Awake{}, err
	}
	if f == nil {
		return homes.Awake{Endpoint: v.endpoint}, nil
	}
	early := f.early
	if !queued {
		early = nil // never ready: only done answers
	}
	select {
	case <-early:
		select {
		case <-f.done: // ended meanwhile: its outcome answers
		default:
			return homes.Awake{Endpoint: f.earlyAt, Waited: time.Since(start), Early: f}, nil
		}
		<-f.done
		if f.err != nil {
			return homes.Awake{}, f.err
		}
		return homes.Awake{Endpoint: f.res.Endpoint, Waited: time.Since(start)}, nil
	case <-f.done:
		if f.err != nil {
			return homes.Awake{}, f.err
		}
		if f.cause == CauseVerify {
			// Not a wake: the home ran all along (Server-Timing says none).
			return homes.Awake{Endpoint: f.res.Endpoint}, nil
		}
		return homes.Awake{Endpoint: f.res.Endpoint, Waited: time.Since(start)}, nil
	case <-ctx.Done():
		return homes.Awake{}, homefault.Waking(e.o.RetryAfter, ctx.Err())
	}
}

// Remove stops home id, deletes its record and forgets it. generation, when
// not zero, must be the stored record's generation (registry.ErrConflict
// otherwise). A home with sessions, or with another lifecycle operation in
// progress, is not removed (fault.Busy). The stopped intent is stored
// before the provider is asked to stop the home.
func (e *Engine) Remove(ctx context.Context, id string, generation uint64) error {
	h := e.home(id)
	if h == nil {
		return homefault.HomeNotFound(id)
	}
	return e.runLocked(ctx, h, lifecycleOp{name: "remove", lease: removeLease,
		run: func(ctx context.Context, l *held) (err error) {
			if generation != 0 && l.rec.Generation != generation {
				return fmt.Errorf("remove %s: generation %d is stale (stored %d): %w", id, generation, l.rec.Generation, registry.ErrConflict)
			}
			giveBack := l.dropVerdict()
			defer func() { giveBack(err) }()
			if n := e.o.Sessions.Count(id); n > 0 {
				return homefault.Busy(fmt.Errorf("remove %s: the home has %d sessions", id, n))
			}
			if prov, ok := e.o.Providers[l.rec.Provider]; ok {
				if _, err := l.stopHome(ctx, prov, modeStop, nil); err != nil {
					return fmt.Errorf("remove %s: %w", id, err)
				}
				if rm, ok := prov.(provider.Remover); ok {
					spec := h.providerSpec(l.rec, l.rec.Version, e.roll.releases.Of(l.rec))
					if err := rm.Remove(ctx, spec); err != nil {
						return fmt.Errorf("remove %s: %w", id, err)
					}
				}
			}
			// The stop may have made a provider's change callback (here or
			// on another instance, neither under the lock) write the
			// record since it was read: the delete reads it again.
			if err := registry.DeleteHomeUnder(ctx, e.o.Store, l.rec, l.lease); err != nil {
				return fmt.Errorf("remove %s: %w", id, err)
			}
			e.Unregister(id)
			e.o.Log.Info("home removed", "home", id)
			return nil
		}})
}

// Unregister forgets home id: no new wake starts for it. A wake already in
// flight finishes on its own. The stored record is left as it is.
func (e *Engine) Unregister(id string) { e.homes.remove(id) }

// Forget unregisters home id, whose record is gone from the fleet's store
// (removed through another gateway, or lost with the store's data). Where
// this gateway's provider keeps the home's process on this machine, the
// process is stopped first: with no record left, no gateway would know to
// stop it. A home removed through another gateway was stopped by its
// runner already, and the stop finds nothing to do.
func (e *Engine) Forget(ctx context.Context, id string) {
	h := e.home(id)
	if h == nil {
		return
	}
	if e.own.Local(h.spec.Provider) {
		h.warm.Store(nil)
		spec := h.providerSpec(registry.Home{}, "", rolls.Release{})
		proven, err := e.o.Providers[h.spec.Provider].Stop(ctx, spec)
		if err != nil || !proven {
			e.o.Log.Warn("fleet: stop the process of a home whose record is gone", "home", id, "proven", proven, "err", err)
		}
	}
	e.Unregister(id)
}
