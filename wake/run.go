package wake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// wakeRun carries one wake through its steps: a slot under the global cap,
// the home's lifecycle lock, the provider, the probe, and the record.
type wakeRun struct {
	e     *Engine
	h     *home
	f     *flight
	start time.Time

	lease      registry.Lease
	locked     bool
	rec        registry.Home
	providerAt time.Duration // time spent in provider.Wake
	probeAt    time.Duration // time spent probing
	probe      ProbeResult
	stopProven bool
	stopped    bool
}

func (w *wakeRun) run(ctx context.Context) (Awake, error) {
	e, h := w.e, w.h
	// A slot under the global cap on wakes running at once.
	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	case <-ctx.Done():
		return Awake{}, w.timeout("waiting for a wake slot", ctx.Err())
	}
	// The lifecycle lock: one operation per home at a time. A suspend or
	// roll that holds it finishes first; this wake then follows.
	if err := w.lock(ctx); err != nil {
		return Awake{}, err
	}
	rec, err := e.o.Store.GetHome(ctx, h.spec.ID)
	if err != nil {
		return Awake{}, fmt.Errorf("wake %s: %w", h.spec.ID, err)
	}
	w.rec = rec
	prov := e.o.Providers[rec.Provider]
	// A stale home with no users is rolled onto the target instead of
	// woken, inside this same flight and lock (roll.go).
	if a, rolled, err := w.rlMaybeRoll(ctx, prov); rolled {
		return a, err
	}
	if err := w.save(ctx, func(r *registry.Home) {
		r.WantRunning = true
		r.Status = registry.StatusWaking
	}); err != nil {
		return Awake{}, err
	}
	w.f.phase.Store("starting")
	t0 := time.Now()
	res, err := prov.Wake(ctx, w.spec())
	w.providerAt = time.Since(t0)
	if err != nil {
		w.fail(ctx, prov)
		if ctx.Err() != nil {
			return Awake{}, w.timeout("starting the home", err)
		}
		return Awake{}, errWakeFailed(e.o.RetryAfter, err)
	}
	endpoint, err := url.Parse(res.Endpoint)
	if err != nil || endpoint.Host == "" {
		w.fail(ctx, prov)
		return Awake{}, fmt.Errorf("wake %s: provider returned endpoint %q: %w", h.spec.ID, res.Endpoint, err)
	}
	// A new endpoint or ref is stored; the target never changes.
	if res.Endpoint != w.rec.Endpoint || res.Ref != w.rec.ProviderRef {
		if err := w.save(ctx, func(r *registry.Home) {
			r.Endpoint, r.ProviderRef = res.Endpoint, res.Ref
		}); err != nil {
			return Awake{}, err
		}
	}
	w.f.phase.Store("probing")
	t1 := time.Now()
	w.probe, endpoint, err = w.probeFollowing(ctx, res.Endpoint, endpoint)
	w.probeAt = time.Since(t1)
	if err != nil {
		w.fail(ctx, prov)
		return Awake{}, w.timeout("waiting for the home to be ready", err)
	}
	now := time.Now()
	if err := w.save(ctx, func(r *registry.Home) {
		r.Status = registry.StatusRunning
		r.Verdict = registry.VerdictHealthy
		r.Reason = ""
		r.LastWakeAt = w.start
		r.LastWakeLatency = now.Sub(w.start)
		r.LastReadyAt = now
	}); err != nil {
		// The home is ready; a lost record write is logged, not fatal.
		e.o.Log.Warn("wake: record ready state", "home", h.spec.ID, "err", err)
	}
	e.o.Sessions.Touch(h.spec.ID)
	return Awake{Endpoint: endpoint}, nil
}

// probeFollowing probes the home at endpoint. If the provider restarts the
// home's process meanwhile (it exited: a port taken between choosing and
// binding, a crash in boot), the probe moves to the new process instead of
// probing a dead endpoint until the ready timeout; the new endpoint and ref
// are stored. It returns the endpoint that passed.
func (w *wakeRun) probeFollowing(ctx context.Context, raw string, endpoint *url.URL) (ProbeResult, *url.URL, error) {
	for moves := 0; ; moves++ {
		pctx, cancel := context.WithCancel(ctx)
		var next *provider.Result
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case r := <-w.f.moved:
				next = &r
				cancel()
			case <-pctx.Done():
			}
		}()
		res, err := Probe(pctx, w.probeSpec(raw), w.f.ready)
		cancel()
		<-watched
		if err == nil || next == nil || ctx.Err() != nil || moves >= 3 {
			return res, endpoint, err
		}
		u, perr := url.Parse(next.Endpoint)
		if perr != nil || u.Host == "" {
			return res, endpoint, err
		}
		if serr := w.save(ctx, func(r *registry.Home) {
			r.Endpoint, r.ProviderRef = next.Endpoint, next.Ref
		}); serr != nil {
			return res, endpoint, serr
		}
		raw, endpoint = next.Endpoint, u
		w.e.o.Log.Info("wake: the home's process was restarted; probing the new one", "home", w.h.spec.ID, "endpoint", raw)
	}
}

func (w *wakeRun) spec() provider.Spec {
	return provider.Spec{ID: w.h.spec.ID, Target: w.h.spec.Target, Version: w.rec.Version, Ref: w.rec.ProviderRef,
		Command: w.e.rlCommandFor(w.rec.Version)}
}

// probeSpec is the readiness probe of this home at endpoint, the same for a
// wake, a roll and a rollback.
func (w *wakeRun) probeSpec(endpoint string) ProbeSpec {
	e, h := w.e, w.h
	spec := e.o.Probe
	spec.Endpoint = endpoint
	if h.spec.Probe != "" {
		spec.Kind = h.spec.Probe
	}
	spec.Path = probePath(spec.Path, h.spec.Target)
	if spec.Kind == "" || spec.Kind == ProbeWS { // "" is ws inside Probe
		spec.Path = "/node/" + h.spec.Target
	}
	if h.spec.RelayToken != "" {
		spec.Header = http.Header{e.o.RelayHeader: {h.spec.RelayToken}}
	}
	return spec
}

// lock takes the home's lifecycle lock, waiting (with a growing pause) while
// another operation holds it, until ctx is done.
func (w *wakeRun) lock(ctx context.Context) error {
	e := w.e
	pause := 2 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		l, err := e.o.Store.Lock(ctx, lockName(w.h.spec.ID), e.o.Instance, e.o.ReadyTimeout+30*time.Second)
		if err == nil {
			w.lease, w.locked = l, true
			return nil
		}
		if !errors.Is(err, registry.ErrLocked) {
			return fmt.Errorf("wake %s: lock: %w", w.h.spec.ID, err)
		}
		t.Reset(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			return w.timeout("waiting for another operation on the home", ctx.Err())
		}
		pause = min(pause*2, 100*time.Millisecond)
	}
}

func lockName(id string) string { return "home/" + id }

// save applies change to the record this wake last read and writes it with
// a compare-and-set, keeping the stored result. The wake holds the home's
// lifecycle lock, so a conflict comes from a writer outside it (the
// provider's restart callback recording a new endpoint and ref): the record
// is read again and change is applied to what is stored, so neither write
// is lost. A conflict that persists is returned.
func (w *wakeRun) save(ctx context.Context, change func(*registry.Home)) error {
	stored, err := registry.UpdateHome(ctx, w.e.o.Store, w.rec, w.e.o.Instance, change)
	if err != nil {
		return fmt.Errorf("wake %s: save: %w", w.h.spec.ID, err)
	}
	w.rec = stored
	w.h.mu.Lock()
	w.h.status = stored.Status
	w.h.mu.Unlock()
	return nil
}

// fail stops a half-woken home and records that it sleeps, with no verdict.
func (w *wakeRun) fail(ctx context.Context, prov provider.Provider) {
	// The stop must run even though the wake's own time ran out.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// The stopped intent is stored before signalling.
	if err := w.save(sctx, func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusSuspending
		r.Verdict = registry.VerdictNone
	}); err != nil {
		w.e.o.Log.Warn("wake: record stop intent", "home", w.h.spec.ID, "err", err)
	}
	proven, err := prov.Stop(sctx, w.spec())
	w.stopped, w.stopProven = true, proven && err == nil
	if err := w.save(sctx, func(r *registry.Home) {
		r.Status = registry.StatusSuspended
		r.Reason = "the last wake failed"
	}); err != nil {
		w.e.o.Log.Warn("wake: record failed wake", "home", w.h.spec.ID, "err", err)
	}
}

func (w *wakeRun) timeout(what string, err error) error {
	return errWakeTimeout(w.e.o.RetryAfter, what, err)
}

// release frees the home's lifecycle lock. It runs before the callers are
// released, so that an operation they start next (a suspend, a roll) finds
// the lock free.
func (w *wakeRun) release() {
	if !w.locked {
		return
	}
	w.locked = false
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.e.o.Store.Unlock(ctx, w.lease); err != nil {
		w.e.o.Log.Warn("wake: unlock", "home", w.h.spec.ID, "err", err)
	}
}

// finish writes the one log line and event of this wake.
func (w *wakeRun) finish(err error) {
	e := w.e
	total := time.Since(w.start)
	ev := Event{Home: w.h.spec.ID, Cause: w.f.cause, Joined: int(w.f.joined.Load()),
		TotalMS: ms(total), ProviderMS: ms(w.providerAt), ProbeMS: ms(w.probeAt)}
	attrs := []any{
		"home", w.h.spec.ID, "cause", w.f.cause, "joined", w.f.joined.Load(),
		"provider_ms", ms(w.providerAt), "probe_ms", ms(w.probeAt), "total_ms", ms(total),
		"probe_attempts", w.probe.Attempts,
	}
	if err != nil {
		attrs = append(attrs, "outcome", "failed", "err", err.Error())
		if w.stopped {
			attrs = append(attrs, "stop_proven", w.stopProven)
		}
		e.o.Log.Error("wake", attrs...)
		ev.Type, ev.Message = EventWakeFailed, err.Error()
		e.o.Events.Publish(ev)
		return
	}
	attrs = append(attrs, "outcome", "ready")
	if w.probe.Signalled {
		attrs = append(attrs, "ready_signal", true)
	}
	e.o.Log.Info("wake", attrs...)
	ev.Type = EventWakeReady
	e.o.Events.Publish(ev)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
