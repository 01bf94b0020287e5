package wakerecord

import (
	"time"

	"github.com/wakegate/wakegate/registry"
)

// The phases of a home's wake as a waiting page shows them (View). The
// first four are the steps of a wake in flight; the others are where a
// home stands when none is.
const (
	// Queued: the wake waits for a slot under wake.max_concurrent.
	Queued = "queued"
	// Starting: the provider is starting the home.
	Starting = "starting"
	// HealthPending: the home was started and the runtime's own health
	// check has not passed yet (a container's HEALTHCHECK, a Fly
	// machine's checks): the wake waits for it before its probe.
	HealthPending = "health-pending"
	// Probing: the home was started and its readiness is being proven.
	Probing = "probing"
	// Ready: the home was proven ready.
	Ready = "ready"
	// Failed: the last wake failed, or the provider gave up on the home;
	// View's Err says why.
	Failed = "failed"
	// Asleep: no wake runs and none failed: the home sleeps.
	Asleep = "asleep"
)

// View is what the public may know of a home's wake: the phase and how
// long the wake has run (at Ready, how long the wake that made the home
// ready took; 0 when none ended here). Err, for Failed only, is the wake's error (a
// *fault.Error: its code and sentence are public, its cause is for the
// log).
type View struct {
	Phase   string
	Elapsed time.Duration
	Err     error
}

// State is what the engine holds of one home when a page asks where its
// wake stands.
type State struct {
	// Warm says the home has a fresh warm verdict.
	Warm bool
	// Waking says a wake is in flight; Phase is the step it is in (a
	// Queued, Starting or another step of the run) and Started when it
	// began.
	Waking  bool
	Phase   string
	Started time.Time
	// GaveUp is the provider's give-up of the home as the public sees it,
	// nil when it did not give up (or a wake succeeded since).
	GaveUp error
	// Ended is the error of the last wake that ended here (nil when it
	// succeeded, or none ended) and Took how long it ran.
	Ended error
	Took  time.Duration
	// Status is the home's stored status as the engine mirrors it.
	Status registry.Status
}

// Observe reports where a home in state s stands: the phase of the wake in
// flight and how long it has run, or, when none runs, ready (a fresh
// verdict, or a running home whose last wake succeeded; with how long that
// wake took, when one ended here), failed (the last wake failed, or the
// provider gave up on the home), or asleep.
func Observe(s State) View {
	var took time.Duration
	if s.Ended == nil {
		took = s.Took
	}
	switch {
	case s.Warm:
		return View{Phase: Ready, Elapsed: took}
	case s.Waking:
		p := s.Phase
		switch p {
		case Queued, Starting, HealthPending:
		default: // "probing", or "proven" (another instance proved it)
			p = Probing
		}
		return View{Phase: p, Elapsed: time.Since(s.Started)}
	case s.GaveUp != nil:
		return View{Phase: Failed, Err: s.GaveUp}
	case s.Ended != nil:
		return View{Phase: Failed, Elapsed: s.Took, Err: s.Ended}
	case s.Status == registry.StatusRunning:
		return View{Phase: Ready, Elapsed: took}
	}
	return View{Phase: Asleep}
}

// Brief is what the admin list filters a home on (status, version, a wake
// in flight), from the engine's memory: filtering 100,000 homes reads no
// record. Status and Version mirror the home's stored record as the engine
// last read or wrote it (registration, every save under the home's
// lifecycle lock); a write by another gateway of a fleet shows once the
// engine reads the record again.
type Brief struct {
	Status  registry.Status
	Version string
	// Waking is true while a wake of the home is in flight on this engine.
	Waking bool
}
