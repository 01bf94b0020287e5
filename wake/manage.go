package wake

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Stats are the engine's counters since it started, for metrics.
type Stats struct {
	// WarmHits counts EnsureAwake calls answered by a fresh warm verdict.
	WarmHits uint64
	// WarmMisses counts EnsureAwake calls that found no fresh verdict and
	// took the slow path (joined or started a wake).
	WarmMisses uint64
}

// admCounters are the engine's cheap counters: one atomic add per call.
type admCounters struct {
	warmHits   atomic.Uint64
	warmMisses atomic.Uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{WarmHits: e.adm.warmHits.Load(), WarmMisses: e.adm.warmMisses.Load()}
}

// Known reports whether home id is registered.
func (e *Engine) Known(id string) bool { return e.home(id) != nil }

// WakeNow wakes home id on an operator's request and waits for it on ctx:
// it joins a wake in flight or starts one whose events carry cause. A home
// with a fresh verdict answers at once.
func (e *Engine) WakeNow(ctx context.Context, id, cause string) (Awake, error) {
	h := e.home(id)
	if h == nil {
		return Awake{}, errHomeNotFound(id)
	}
	start := time.Now()
	f, v, err := e.join(h, cause)
	if err != nil {
		return Awake{}, err
	}
	if f == nil {
		return Awake{Endpoint: v.endpoint}, nil
	}
	select {
	case <-f.done:
		if f.err != nil {
			return Awake{}, f.err
		}
		return Awake{Endpoint: f.res.Endpoint, Waited: time.Since(start)}, nil
	case <-ctx.Done():
		return Awake{}, errWaking(e.o.RetryAfter, ctx.Err())
	}
}

// Remove stops home id, deletes its record and forgets it. generation, when
// not zero, must be the stored record's generation (registry.ErrConflict
// otherwise). A home with sessions, or with another lifecycle operation in
// progress, is not removed (IsBusy). The stopped intent is stored before
// the provider is asked to stop the home.
func (e *Engine) Remove(ctx context.Context, id string, generation uint64) error {
	h := e.home(id)
	if h == nil {
		return errHomeNotFound(id)
	}
	l, err := e.o.Store.Lock(ctx, lockName(id), e.o.Instance, time.Minute)
	if errors.Is(err, registry.ErrLocked) {
		return errBusy(fmt.Errorf("remove %s: %w", id, err))
	}
	if err != nil {
		return fmt.Errorf("remove %s: lock: %w", id, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := e.o.Store.Unlock(uctx, l); err != nil && !errors.Is(err, registry.ErrLeaseLost) {
			e.o.Log.Warn("remove: unlock", "home", id, "err", err)
		}
	}()
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	if generation != 0 && rec.Generation != generation {
		return fmt.Errorf("remove %s: generation %d is stale (stored %d): %w", id, generation, rec.Generation, registry.ErrConflict)
	}
	h.warm.Store(nil)
	if n := e.o.Sessions.Count(id); n > 0 {
		return errBusy(fmt.Errorf("remove %s: the home has %d sessions", id, n))
	}
	rec, err = registry.UpdateHome(ctx, e.o.Store, rec, e.o.Instance, func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusSuspending
		r.Verdict = registry.VerdictNone
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	e.setStatus(h, rec.Status)
	if prov, ok := e.o.Providers[rec.Provider]; ok {
		spec := provider.Spec{ID: id, Target: rec.Target, Version: rec.Version, Ref: rec.ProviderRef}
		if _, err := prov.Stop(ctx, spec); err != nil {
			return fmt.Errorf("remove %s: stop: %w", id, err)
		}
	}
	if err := e.o.Store.DeleteHome(ctx, id, registry.CondOf(rec)); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	e.Unregister(id)
	e.o.Log.Info("home removed", "home", id)
	return nil
}

// Unregister forgets home id: no new wake starts for it. A wake already in
// flight finishes on its own. The stored record is left as it is.
func (e *Engine) Unregister(id string) {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	old := *e.homes.Load()
	if _, ok := old[id]; !ok {
		return
	}
	m := make(map[string]*home, len(old))
	for k, v := range old {
		if k != id {
			m[k] = v
		}
	}
	e.homes.Store(&m)
}
