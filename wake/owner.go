package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// A machine-local home in a fleet is run by one gateway (DESIGN rule 28,
// package ownership). Here are the engine's steps that follow that rule: a
// wake that forwards to the home's runner (viaRunner), a stop asked of the
// runner (stopVia), the stop this gateway does for another (StopRun), and
// the engine's answers to the fleet, which ask its homes of
// ownership.Owner.

// runnerRecheck paces the reads of the record while the runner's
// endpoint does not answer.
const runnerRecheck = 250 * time.Millisecond

// runnerProbeTimeout bounds one probe of the runner's endpoint.
const runnerProbeTimeout = 2 * time.Second

// viaRunner serves a wake of a home whose process another live gateway
// runs: from its recorded endpoint, once that passes the probe. ok is
// false when the home has no such runner (any more): the wake goes on
// through this gateway's provider.
func (w *wakeRun) viaRunner(ctx context.Context) (a homes.Awake, ok bool, err error) {
	e := w.e
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		runner, err := e.own.RunnerElsewhere(ctx, w.rec)
		if err != nil || runner == "" {
			return homes.Awake{}, false, err
		}
		if !ownership.MayRun(w.rec.Status) {
			// Its last stop was not proven: the runner's provider still
			// tracks what may be left of it. A new process is this
			// gateway's; its provider adopts the old one only if it is
			// provably the recorded process.
			return homes.Awake{}, false, nil
		}
		if m := w.rec.RunnerMachine; m != "" && e.o.Machine != "" && m != e.o.Machine && ownership.MachineOnly(w.rec.Endpoint) {
			// Its loopback endpoint (or socket) is on the runner's machine:
			// what listens there on this one is something else.
			return homes.Awake{}, true, ownership.ErrElsewhere(e.o.RetryAfter, w.h.spec.ID, runner)
		}
		if u, perr := parseEndpoint(w.rec.Endpoint); perr == nil && u.Host != "" {
			w.setPhase("probing at its runner")
			pctx, cancel := context.WithTimeout(ctx, runnerProbeTimeout)
			_, perr = probe.Run(pctx, w.probeSpec(w.rec.Endpoint), nil)
			cancel()
			if perr == nil {
				w.f.cause = CauseVerify
				e.o.Log.Debug("wake: the home runs on another gateway of the fleet; forwarding there",
					"home", w.h.spec.ID, "runner", runner)
				return homes.Awake{Endpoint: u}, true, nil
			}
		}
		if t == nil {
			t = time.NewTimer(runnerRecheck)
		} else {
			t.Reset(runnerRecheck)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return homes.Awake{}, true, w.timeout("waiting for the home at the gateway that runs it ("+runner+")", ctx.Err())
		}
		rec, err := e.o.Store.GetHome(ctx, w.h.spec.ID)
		if err != nil {
			return homes.Awake{}, true, err
		}
		w.rec = rec
	}
}

// stopVia takes the home down through its runner when another live
// gateway runs it (ok true), or reports that this gateway's provider is
// the one to ask (ok false).
func (l *held) stopVia(ctx context.Context, spec provider.Spec, suspend bool) (s stopped, ok bool, err error) {
	runner, err := l.e.own.RunnerElsewhere(ctx, l.rec)
	if err != nil {
		return stopped{how: "stop"}, true, err
	}
	if runner == "" {
		return stopped{}, false, nil
	}
	how, proven, err := l.e.o.Peers.Stop(ctx, runner, spec, suspend)
	if how == "" {
		how = "stop"
	}
	if err != nil {
		err = fmt.Errorf("ask %s, which runs the home, to %s it: %w", runner, how, err)
	}
	return stopped{how: how, proven: proven && err == nil}, true, err
}

// StopRun suspends (where the provider can, with suspend) or stops the
// process this gateway runs for home id, for another gateway of the fleet
// that holds the home's lifecycle lock and has stored the stopped intent
// (Peers.Stop). ref is the process the record names. It reports how it
// took the home down and whether the stop was proven.
func (e *Engine) StopRun(ctx context.Context, id, ref string, suspend bool) (how string, proven bool, err error) {
	h := e.home(id)
	if h == nil {
		return "stop", false, homefault.HomeNotFound(id)
	}
	prov, ok := e.o.Providers[h.spec.Provider]
	if !ok {
		return "stop", false, fmt.Errorf("stop %s: unknown provider %q", id, h.spec.Provider)
	}
	h.warm.Store(nil)
	rec, err := e.o.Store.GetHome(ctx, id)
	if err != nil {
		return "stop", false, fmt.Errorf("stop %s: %w", id, err)
	}
	spec := h.providerSpec(rec, rec.Version, e.roll.releases.Of(rec))
	spec.Ref = ref
	how = "stop"
	if suspend {
		how = "suspend"
		err = prov.Suspend(ctx, spec)
		proven = err == nil
		if errors.Is(err, provider.ErrUnsupported) {
			how = "stop"
			proven, err = prov.Stop(ctx, spec)
		}
	} else {
		proven, err = prov.Stop(ctx, spec)
	}
	if proven && err == nil {
		e.setStatus(h, registry.StatusSuspended)
	}
	e.o.Log.Info("fleet: stopped the home's process for another gateway", "home", id, "how", how, "proven", proven && err == nil)
	return how, proven && err == nil, err
}

// Release clears this gateway as the runner of the homes ids, whose
// processes it has stopped (a shutdown's quiesce): their desired state
// stays, and the next request on any gateway starts them again.
func (e *Engine) Release(ctx context.Context, ids []string) { e.own.Release(ctx, ids) }

// MayRestart reports whether this gateway may restart home id's process,
// which exited by itself (provider.Env.MayRestart): always outside a
// fleet, or for a home that is not machine-local; in a fleet only while
// it holds the home, after claiming the restart in the store
// (ownership.Owner.MayRestart).
func (e *Engine) MayRestart(id string) bool {
	h := e.home(id)
	if h == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(e.ctx, providerChangeTimeout)
	defer cancel()
	return e.own.MayRestart(ctx, id, h.spec.Provider)
}

// Holds returns those of ids whose process this gateway may stop at its
// shutdown (ownership.Owner.Holds).
func (e *Engine) Holds(ctx context.Context, ids []string) []string {
	return e.own.Holds(ctx, ids, func(id string) bool {
		h := e.home(id)
		return h != nil && e.own.Local(h.spec.Provider)
	})
}

// RecordRun writes again the record of home id when this gateway's
// provider runs its process and the record is missing or does not say so,
// after the fleet's store lost its data (ownership.Owner.RecordRun). It
// reports whether the home runs here.
func (e *Engine) RecordRun(ctx context.Context, id string) (bool, error) {
	h := e.home(id)
	if h == nil {
		return false, nil
	}
	return e.own.RecordRun(ctx, h.owned())
}

// Reseed creates the record of home id, as a sleeping home, when it is
// missing (ownership.Owner.Reseed); a record that exists is left as it
// is. It reports whether it created one.
func (e *Engine) Reseed(ctx context.Context, id string) (bool, error) {
	h := e.home(id)
	if h == nil {
		return false, homefault.HomeNotFound(id)
	}
	created, err := e.own.Reseed(ctx, h.owned())
	if created {
		// Nothing runs it on this gateway: its next request wakes it.
		h.warm.Store(nil)
		e.setStatus(h, registry.StatusSleeping)
	}
	return created, err
}

// owned is h as the fleet's heal needs it.
func (h *home) owned() ownership.Home {
	h.mu.Lock()
	stored := h.version
	h.mu.Unlock()
	return ownership.Home{ID: h.spec.ID, Target: h.spec.Target, Provider: h.spec.Provider, Version: h.spec.Version, Stored: stored}
}
