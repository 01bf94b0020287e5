package wake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Ownership of machine-local homes in a fleet (DESIGN rule 28). A home
// whose process lives on one machine (a provider.Quiescer: exec) has one
// runner, the gateway whose provider started or adopted its process,
// named in the record (registry.Home.Runner) with the process identity
// (ProviderRef). Only the runner starts, adopts, restarts or stops that
// process:
//
//   - a wake elsewhere that finds the home run by a live gateway proves it
//     at its recorded endpoint and forwards there; it never asks its own
//     provider, which would adopt the process and restart it as a crash
//     the moment the runner stops it. While that endpoint does not answer
//     (the runner restarts the process), the record is read again until it
//     names one that does, or another runner, or none;
//   - a stop elsewhere (an idle suspend, an operator's suspend, a removal,
//     the stop after a failed wake) keeps the lifecycle lock, stores the
//     stopped intent as always, and asks the runner to stop the process
//     (Peers.Stop); a proven stop clears the runner;
//   - a runner whose heartbeat ran out is dead: the next operation that
//     needs the process takes the home over through its own provider,
//     which adopts the recorded process only when pid, executable and start
//     time all match (rule 17), and otherwise finds it gone and starts one
//     of its own;
//   - a gateway that shuts down and stops its homes clears itself as their
//     runner (Release), so that the next request anywhere starts the home
//     at once.

// Peers is the rest of a fleet, as the engine needs it for machine-local
// homes.
type Peers interface {
	// Alive reports whether instance's heartbeat is live; an error when
	// the fleet's store does not answer.
	Alive(ctx context.Context, instance string) (bool, error)
	// Stop asks instance, the runner of the home s names, to suspend
	// (suspend true, where its provider can) or stop that home's process,
	// and returns what it did: "suspend" or "stop", and whether the stop
	// was proven (see provider.Provider.Stop).
	Stop(ctx context.Context, instance string, s provider.Spec, suspend bool) (how string, proven bool, err error)
}

// runnerRecheck paces the reads of the record while the runner's
// endpoint does not answer.
const runnerRecheck = 250 * time.Millisecond

// runnerProbeTimeout bounds one probe of the runner's endpoint.
const runnerProbeTimeout = 2 * time.Second

// local reports whether homes of provider name live on one machine and
// this engine is in a fleet: ownership applies to them.
func (e *Engine) local(name string) bool {
	if e.o.Peers == nil {
		return false
	}
	_, ok := e.o.Providers[name].(provider.Quiescer)
	return ok
}

// runnerElsewhere returns the runner of rec when it is another gateway of
// the fleet whose heartbeat is live, "" otherwise. A runner whose
// heartbeat ran out is logged: the caller takes the home over.
func (e *Engine) runnerElsewhere(ctx context.Context, rec registry.Home) (string, error) {
	if !e.local(rec.Provider) || rec.Runner == "" || rec.Runner == e.o.Instance {
		return "", nil
	}
	alive, err := e.o.Peers.Alive(ctx, rec.Runner)
	if err != nil {
		return "", fmt.Errorf("home %s: is its runner %s alive: %w", rec.ID, rec.Runner, err)
	}
	if !alive {
		e.o.Log.Warn("fleet: the gateway that ran the home has no live heartbeat; this gateway takes the home over",
			"home", rec.ID, "runner", rec.Runner)
		return "", nil
	}
	return rec.Runner, nil
}

// viaRunner serves a wake of a home whose process another live gateway
// runs: from its recorded endpoint, once that passes the probe. ok is
// false when the home has no such runner (any more): the wake goes on
// through this gateway's provider.
func (w *wakeRun) viaRunner(ctx context.Context) (a Awake, ok bool, err error) {
	e := w.e
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		runner, err := e.runnerElsewhere(ctx, w.rec)
		if err != nil || runner == "" {
			return Awake{}, false, err
		}
		if !mayRun(w.rec.Status) {
			// Its last stop was not proven: the runner's provider still
			// tracks what may be left of it. A new process is this
			// gateway's; its provider adopts the old one only if it is
			// provably the recorded process.
			return Awake{}, false, nil
		}
		if m := w.rec.RunnerMachine; m != "" && e.o.Machine != "" && m != e.o.Machine && machineOnly(w.rec.Endpoint) {
			// Its loopback endpoint (or socket) is on the runner's machine:
			// what listens there on this one is something else.
			return Awake{}, true, errElsewhere(e.o.RetryAfter, w.h.spec.ID, runner)
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
				return Awake{Endpoint: u}, true, nil
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
			return Awake{}, true, w.timeout("waiting for the home at the gateway that runs it ("+runner+")", ctx.Err())
		}
		rec, err := e.o.Store.GetHome(ctx, w.h.spec.ID)
		if err != nil {
			return Awake{}, true, err
		}
		w.rec = rec
	}
}

// stopVia takes the home down through its runner when another live
// gateway runs it (ok true), or reports that this gateway's provider is
// the one to ask (ok false).
func (l *held) stopVia(ctx context.Context, spec provider.Spec, suspend bool) (s stopped, ok bool, err error) {
	runner, err := l.e.runnerElsewhere(ctx, l.rec)
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
		return "stop", false, errHomeNotFound(id)
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
	spec := h.providerSpec(rec, rec.Version, e.roll.releaseOf(rec))
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
func (e *Engine) Release(ctx context.Context, ids []string) {
	for _, id := range ids {
		rec, err := e.o.Store.GetHome(ctx, id)
		if err == nil && rec.Runner != e.o.Instance {
			continue
		}
		if err == nil {
			_, err = registry.UpdateHome(ctx, e.o.Store, rec, e.o.Instance, func(r *registry.Home) {
				if r.Runner == e.o.Instance {
					r.Runner, r.RunnerMachine = "", ""
				}
			})
		}
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			e.o.Log.Warn("fleet: clear this gateway as the runner of a stopped home", "home", id, "err", err)
		}
	}
}

// machineOnly reports whether endpoint is reachable on its own machine
// only: a loopback address or a Unix socket.
func machineOnly(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return true
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errElsewhere is a request for a home whose process another gateway runs
// on another machine, at an endpoint only that machine reaches.
func errElsewhere(retry time.Duration, id, runner string) *fault.Error {
	return fault.New(fault.Unavailable, "home_elsewhere",
		"The home runs behind another gateway; try again shortly.").
		WithRetry(retry).
		WithHint(fmt.Sprintf("home %s runs on the machine of gateway %s, at an endpoint only that machine reaches: "+
			"route its requests to that gateway, or run the gateways that share exec homes on one machine", id, runner))
}
