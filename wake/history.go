package wake

import (
	"sync"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// HistorySize is how many finished wakes the engine remembers per home.
const HistorySize = 20

// WakeRecord is one finished wake of a home, as its log line says it.
type WakeRecord struct {
	// At is when the wake started.
	At time.Time `json:"at"`
	// Cause is why it ran: "cold", "waited" (another operation woke the
	// home while this one waited for its lock: CauseWaited), "verify" (a
	// home found running, only proven ready again: no start), "adopt",
	// "roll", "admin" or an operator's.
	Cause string `json:"cause"`
	// Joined counts the callers that joined it after the first.
	Joined int `json:"joined"`
	// ProviderMS, ProbeMS and TotalMS are the milliseconds spent in the
	// provider, in the ready probe and in all.
	ProviderMS float64 `json:"provider_ms"`
	ProbeMS    float64 `json:"probe_ms"`
	TotalMS    float64 `json:"total_ms"`
	// ProbeAttempts counts the probe's attempts.
	ProbeAttempts int `json:"probe_attempts"`
	// Outcome is "ready" or "failed".
	Outcome string `json:"outcome"`
	// Error is why a failed wake failed, and Hint the likely fix when one
	// is known (for operators).
	Error string `json:"error,omitempty"`
	Hint  string `json:"hint,omitempty"`
	// StopProven says, for a failed wake that stopped the half-woken home,
	// whether the provider proved it down; nil when there was no stop.
	StopProven *bool `json:"stop_proven,omitempty"`
}

// wakeHistory is a home's ring of its last HistorySize wakes. The ring is
// allocated by the home's first wake: most registered homes of a large
// gateway never wake, and a ring held inline cost each of them 2.7 KiB.
type wakeHistory struct {
	mu   sync.Mutex
	ring []WakeRecord // nil until the first wake, then HistorySize long
	n    int          // records held, at most HistorySize
	next int          // index of the next write
}

// add remembers r, forgetting the oldest record when full.
func (h *wakeHistory) add(r WakeRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ring == nil {
		h.ring = make([]WakeRecord, HistorySize)
	}
	h.ring[h.next] = r
	h.next = (h.next + 1) % HistorySize
	if h.n < HistorySize {
		h.n++
	}
}

// list returns the records, newest first.
func (h *wakeHistory) list() []WakeRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]WakeRecord, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.ring[(h.next-i+HistorySize)%HistorySize])
	}
	return out
}

// record remembers the finished wake w in its home's history.
func (w *wakeRun) record(total time.Duration, err error) {
	r := WakeRecord{At: w.start, Cause: w.f.cause, Joined: int(w.f.joined.Load()),
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
	w.h.history.add(r)
}

// WakeHistory returns the last wakes of home id that finished on this
// engine since it started, newest first; nil for an unknown home.
func (e *Engine) WakeHistory(id string) []WakeRecord {
	h := e.home(id)
	if h == nil {
		return nil
	}
	return h.history.list()
}

// LastWake returns the last wake of home id that finished on this engine,
// nil when none did since it started (or id is unknown).
func (e *Engine) LastWake(id string) *WakeRecord {
	h := e.home(id)
	if h == nil {
		return nil
	}
	h.history.mu.Lock()
	defer h.history.mu.Unlock()
	if h.history.n == 0 {
		return nil
	}
	r := h.history.ring[(h.history.next-1+HistorySize)%HistorySize]
	return &r
}
