package wake

import (
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/wakerecord"
)

// What the engine tells of a home's wakes, past and current, from its
// memory: the values and the reading of them are package wakerecord's.

// wakeEnd is how a wake ended: its error (nil when the home became ready)
// and how long it ran.
type wakeEnd struct {
	err  error
	took time.Duration
}

// record remembers the finished wake w in its home's history.
func (w *wakeRun) record(total time.Duration, err error) {
	r := wakerecord.Record{At: w.start, Cause: w.f.cause, Joined: int(w.f.joined.Load()),
		ProviderMS: ms(w.providerAt), ProbeMS: ms(w.probeAt), TotalMS: ms(total),
		ProbeAttempts: w.probe.Attempts, Outcome: "ready"}
	if err != nil {
		r.Outcome, r.Error = "failed", err.Error()
		if fe, ok := fault.As(err); ok {
			r.Hint = fe.Hint
		}
		if w.stop != nil {
			proven := w.stop.proven
			r.StopProven = &proven
		}
	}
	w.h.history.Add(r)
}

// WakeHistory returns the last wakes of home id that finished on this
// engine since it started, newest first; nil for an unknown home.
func (e *Engine) WakeHistory(id string) []wakerecord.Record {
	if h := e.home(id); h != nil {
		return h.history.List()
	}
	return nil
}

// LastWake returns the last wake of home id that finished on this engine,
// nil when none did since it started (or id is unknown).
func (e *Engine) LastWake(id string) *wakerecord.Record {
	if h := e.home(id); h != nil {
		return h.history.Last()
	}
	return nil
}

// ExpectedWake is how long a wake of home id usually takes on this engine
// (wakerecord.Expected), zero when none succeeded here yet.
func (e *Engine) ExpectedWake(id string) time.Duration {
	return wakerecord.Expected(e.WakeHistory(id))
}

// View reports where home id's wake stands, for a waiting page
// (wakerecord.Observe). It starts nothing and reads no store: a page may
// watch a home as often as it likes without waking it. ok is false for an
// unknown home.
func (e *Engine) View(id string) (v wakerecord.View, ok bool) {
	h := e.home(id)
	if h == nil {
		return wakerecord.View{}, false
	}
	s := wakerecord.State{Warm: e.Warm(id)}
	h.mu.Lock()
	f, ended, failed := h.flight, h.ended, h.failed
	s.Status = h.status
	h.mu.Unlock()
	if f != nil {
		s.Waking, s.Started = true, f.started
		s.Phase, _ = f.phase.Load().(string)
	}
	if failed != "" {
		s.GaveUp = homefault.HomeFailed(e.o.RetryAfter, failed)
	}
	if ended != nil {
		s.Ended, s.Took = ended.err, ended.took
	}
	return wakerecord.Observe(s), true
}

// Brief returns home id's brief for the admin list; ok is false for a home
// the engine does not know.
func (e *Engine) Brief(id string) (b wakerecord.Brief, ok bool) {
	h := e.home(id)
	if h == nil {
		return wakerecord.Brief{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return wakerecord.Brief{Status: h.status, Version: h.version, Waking: h.flight != nil}, true
}

// setVersion mirrors the version of h's stored record.
func (h *home) setVersion(v string) {
	h.mu.Lock()
	h.version = v
	h.mu.Unlock()
}
