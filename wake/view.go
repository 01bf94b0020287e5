package wake

import (
	"slices"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// The phases of a home's wake as a waiting page shows them (View). The
// first three are the steps of a wake in flight; the others are where a
// home stands when none is.
const (
	// ViewQueued: the wake waits for a slot under wake.max_concurrent.
	ViewQueued = "queued"
	// ViewStarting: the provider is starting the home.
	ViewStarting = "starting"
	// ViewProbing: the home was started and its readiness is being proven.
	ViewProbing = "probing"
	// ViewReady: the home was proven ready.
	ViewReady = "ready"
	// ViewFailed: the last wake failed, or the provider gave up on the
	// home; View's Err says why.
	ViewFailed = "failed"
	// ViewAsleep: no wake runs and none failed: the home sleeps.
	ViewAsleep = "asleep"
)

// WakeView is what the public may know of a home's wake: the phase and how
// long the wake has run. Err, for ViewFailed only, is the wake's error (a
// *fault.Error: its code and sentence are public, its cause is for the
// log).
type WakeView struct {
	Phase   string
	Elapsed time.Duration
	Err     error
}

// wakeEnd is how a wake ended: its error (nil when the home became ready)
// and how long it ran.
type wakeEnd struct {
	err  error
	took time.Duration
}

// View reports where home id's wake stands, for a waiting page: the phase
// of the wake in flight and how long it has run, or, when none runs, ready
// (a fresh verdict, or a running home whose last wake here succeeded),
// failed (the last wake failed, or the provider gave up on the home), or
// asleep. It starts nothing and reads no store: a page may watch a home
// as often as it likes without waking it. ok is false for an unknown
// home.
func (e *Engine) View(id string) (v WakeView, ok bool) {
	h := e.home(id)
	if h == nil {
		return WakeView{}, false
	}
	if e.Warm(id) {
		return WakeView{Phase: ViewReady}, true
	}
	h.mu.Lock()
	f, ended, failed, status := h.flight, h.ended, h.failed, h.status
	h.mu.Unlock()
	switch {
	case f != nil:
		p, _ := f.phase.Load().(string)
		switch p {
		case ViewQueued, ViewStarting:
		default: // "probing", or "proven" (another instance proved it)
			p = ViewProbing
		}
		return WakeView{Phase: p, Elapsed: time.Since(f.started)}, true
	case failed != "":
		return WakeView{Phase: ViewFailed, Err: errHomeFailed(e.o.RetryAfter, failed)}, true
	case ended != nil && ended.err != nil:
		return WakeView{Phase: ViewFailed, Elapsed: ended.took, Err: ended.err}, true
	case status == registry.StatusRunning:
		return WakeView{Phase: ViewReady}, true
	}
	return WakeView{Phase: ViewAsleep}, true
}

// ExpectedWake is how long a wake of home id usually takes: the median of
// its last successful wakes on this engine (up to five), zero when none
// succeeded here yet. A waiting page paces its progress bar by it.
func (e *Engine) ExpectedWake(id string) time.Duration {
	var ms []float64
	for _, r := range e.WakeHistory(id) {
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
