// Package homes holds the values that describe a home to whoever asks the
// lifecycle engine about it: what the gateway's config says of a home
// (Spec), where a home is awake for a request (Awake), how a home stands
// now (State) and how the stop after a failed wake went (WakeStop). The
// engine (package wake) makes and answers them; the request path (route),
// the control plane (control) and the admin API read them here, so that
// none of them names a type of the engine.
//
// It holds no DESIGN rule of its own: the rules these values report on
// (1-5, a wake and what it records; 5's proven stop) live in package wake.
package homes

import (
	"net/url"
	"time"

	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/schedule"
)

// Spec is what the gateway's config says about a home.
type Spec struct {
	ID          string
	Target      string
	Provider    string
	Version     string
	RelayToken  string        // the resolved secret; "" for none
	IdleTimeout time.Duration // zero: never suspended
	// Probe is how this home's readiness is proven; "" means the engine's
	// probe template (wake.Options.Probe).
	Probe probe.Kind
	// ProbePath, ProbeStatuses and ProbeSettle override the probe
	// template's Path, Statuses and Settle for this home; zero keeps the
	// template's.
	ProbePath     string
	ProbeStatuses []int
	ProbeSettle   time.Duration
	// ReadyTimeout bounds this home's wakes; zero: the engine's
	// (wake.Options.ReadyTimeout).
	ReadyTimeout time.Duration
	// Settings are the home's own provider settings (command, env, dir,
	// options), passed on in every provider.Spec.
	Settings provider.Settings
	// Schedule is the home's running hours: the engine wakes it at each
	// window's start and never idle-suspends it inside a window. Nil:
	// none.
	Schedule *schedule.Schedule
}

// Awake is the answer of the engine's EnsureAwake.
type Awake struct {
	// Endpoint is where the home listens.
	Endpoint *url.URL
	// Waited is how long the caller waited for a wake (zero on a warm hit).
	Waited time.Duration
	// Early is the wake that released this caller before its probe passed
	// (the engine's EnsureQueued), nil otherwise: the engine's Settled
	// waits for its outcome.
	Early Pending
}

// Queued reports whether the home was not proven ready yet when a was
// returned: its process was started and its socket queues connections
// (EnsureQueued). A failed forward then asks the engine's Settled.
func (a Awake) Queued() bool { return a.Early != nil }

// Pending is a wake that released its callers before its probe passed (a
// home whose socket queues connections while it boots) and goes on.
type Pending interface {
	// Done is closed when the wake ended.
	Done() <-chan struct{}
	// Outcome is how the wake ended, once Done is closed: the home's
	// endpoint when it was proven ready, else the wake's error.
	Outcome() (*url.URL, error)
}

// State is a read-only view of one home, for app status.
type State struct {
	// Status is the stored lifecycle status.
	Status registry.Status
	// Reason says why the status is failed or unknown.
	Reason string
	// Endpoint is where the home listens (unix:///path for a socket): the
	// warm verdict's, else the stored one ("" when never woken).
	Endpoint string
	// Waking is true while a wake of the home is in flight.
	Waking bool
	// Warm is true while a fresh warm verdict stands.
	Warm bool
	// StartedAt is when the home's last wake started (zero if never).
	StartedAt time.Time
	// LastStop is the stop of the home after its last failed wake, nil
	// when no failed wake stopped it since the engine started.
	LastStop *WakeStop
}

// WakeStop is the stop of a half-woken home after a failed wake.
type WakeStop struct {
	// At is when the stop ended.
	At time.Time `json:"at"`
	// Proven is true when the provider verified the home is down; false
	// means a process may be left running.
	Proven bool `json:"proven"`
	// Error is why the stop failed, "" when it did not.
	Error string `json:"error,omitempty"`
}
