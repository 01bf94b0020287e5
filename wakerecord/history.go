package wakerecord

import (
	"slices"
	"sync"
	"time"
)

// HistorySize is how many finished wakes the engine remembers per home.
const HistorySize = 20

// Record is one finished wake of a home, as its log line says it.
type Record struct {
	// At is when the wake started.
	At time.Time `json:"at"`
	// Cause is why it ran: "cold", "waited" (another operation woke the
	// home while this one waited for its lock: wake.CauseWaited), "verify"
	// (a home found running, only proven ready again: no start), "adopt",
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

// History is a home's ring of its last HistorySize wakes; its zero value
// is empty and ready to use. The ring is allocated by the home's first
// wake: most registered homes of a large gateway never wake, and a ring
// held inline cost each of them 2.7 KiB.
type History struct {
	mu   sync.Mutex
	ring []Record // nil until the first wake, then HistorySize long
	n    int      // records held, at most HistorySize
	next int      // index of the next write
}

// Add remembers r, forgetting the oldest record when full.
func (h *History) Add(r Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ring == nil {
		h.ring = make([]Record, HistorySize)
	}
	h.ring[h.next] = r
	h.next = (h.next + 1) % HistorySize
	if h.n < HistorySize {
		h.n++
	}
}

// List returns the records, newest first.
func (h *History) List() []Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Record, 0, h.n)
	for i := 1; i <= h.n; i++ {
		out = append(out, h.ring[(h.next-i+HistorySize)%HistorySize])
	}
	return out
}

// Last returns the newest record, nil when there is none.
func (h *History) Last() *Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return nil
	}
	r := h.ring[(h.next-1+HistorySize)%HistorySize]
	return &r
}

// Expected is how long a wake usually takes, from wakes listed newest
// first: the median of the last successful ones (up to five), zero when
// none succeeded. A waiting page paces its progress bar by it.
func Expected(wakes []Record) time.Duration {
	var ms []float64
	for _, r := range wakes {
		if r.Outcome == "ready" {
			ms = append(ms, r.TotalMS)
			if len(ms) == 5 {
				break
			}
		}
	}
	if len(ms) == 0 {
		return 0
	}
	slices.Sort(ms)
	return time.Duration(ms[len(ms)/2] * float64(time.Millisecond))
}
