package wake

import (
	"sync/atomic"
	"time"
)

// Metrics receives the engine's counts where things happen: the engine
// calls it at the source, never from its event bus (which drops events for
// slow subscribers). Implementations are cheap and safe for concurrent
// use. No argument names a home, so labels made of them stay bounded.
type Metrics interface {
	// WakeDone counts a finished wake: outcome "ready" or "failed", its
	// cause ("cold", CauseVerify, CauseWaited, "adopt", "roll", "admin" or an operator's), and the
	// time spent in the provider, in the probe and in all.
	WakeDone(outcome, cause string, provider, probe, total time.Duration)
	// WakeJoined counts a caller that joined a wake already in flight.
	WakeJoined()
	// WakeStopped counts the stop of a half-woken home after a failed wake
	// or rollback, proven or not.
	WakeStopped(proven bool)
	// Suspended counts a home suspended ("suspend") or stopped ("stop")
	// while idle or on request.
	Suspended(how string)
	// Rolled counts a finished roll: "done", "rolled_back" or "incident".
	Rolled(outcome string)
	// HomeFailed counts a home its provider gave up on.
	HomeFailed()
	// Refreshed counts a finished refresh (package refresh): "changed" (the
	// record or the verdict followed the provider), "unchanged", or
	// "unknown" (the provider did not say).
	Refreshed(outcome string)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) WakeDone(string, string, time.Duration, time.Duration, time.Duration) {}
func (noMetrics) WakeJoined()                                                          {}
func (noMetrics) WakeStopped(bool)                                                     {}
func (noMetrics) Suspended(string)                                                     {}
func (noMetrics) Rolled(string)                                                        {}
func (noMetrics) HomeFailed()                                                          {}
func (noMetrics) Refreshed(string)                                                     {}

// Stats are the engine's own counters since it started.
type Stats struct {
	// WarmHits counts EnsureAwake calls answered by a fresh warm verdict.
	WarmHits uint64
	// WarmMisses counts EnsureAwake calls that found no fresh verdict and
	// took the slow path (joined or started a wake).
	WarmMisses uint64
	// IdleTicks counts the rounds of the idle loop (Run) that finished.
	IdleTicks uint64
	// IdleVisits counts the homes the idle loop and eager rolls looked
	// at, over all rounds: only awake homes are, so it grows with them and
	// not with the homes registered.
	IdleVisits uint64
	// Homes is how many homes are registered now, Awake how many of them
	// have the status running.
	Homes, Awake int
	// FencedExits counts exits of a home's process this gateway saw and
	// did not answer with a restart, because it no longer held the home
	// in its fleet; FencedStops the processes it had started for a home
	// that had passed to another gateway, and stopped (ownership.Lease).
	FencedExits, FencedStops uint64
}

// engineCounts are the counters of the warm path and the idle loop: one
// atomic add each, read by Stats.
type engineCounts struct {
	warmHits   atomic.Uint64
	warmMisses atomic.Uint64
	idleTicks  atomic.Uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.homes.mu.Lock()
	awake := len(e.homes.awake)
	e.homes.mu.Unlock()
	return Stats{WarmHits: e.counts.warmHits.Load(), WarmMisses: e.counts.warmMisses.Load(),
		IdleTicks: e.counts.idleTicks.Load(), IdleVisits: uint64(e.homes.visits.Load()),
		Homes: int(e.homes.n.Load()), Awake: awake,
		FencedExits: e.own.Lease.FencedExits.Load(), FencedStops: e.own.Lease.FencedStops.Load()}
}
