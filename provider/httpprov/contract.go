package httpprov

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// The contract's header names (docs/http-provider.md).
const (
	// HeaderTimestamp carries the request's Unix time in seconds.
	HeaderTimestamp = "Wakegate-Timestamp"
	// HeaderNonce carries a random value unique to each request sent,
	// retries included; a control plane refuses a nonce it has seen.
	HeaderNonce = "Wakegate-Nonce"
	// HeaderSignature carries "v1=" and the hex HMAC-SHA256 of the
	// canonical request (Canonical).
	HeaderSignature = "Wakegate-Signature"
	// HeaderIdempotencyKey names one operation: every retry of it carries
	// the same key, so a control plane does the operation once.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// The operations, as the last path segment of a POST.
const (
	OpWake     = "wake"
	OpSuspend  = "suspend"
	OpStop     = "stop"
	OpRecreate = "recreate"
)

// Request is the JSON body of every POST to the control plane.
type Request struct {
	// ID is the home's id (also in the path).
	ID string `json:"id"`
	// Target is the name in /node/{target}.
	Target string `json:"target"`
	// Version is the version the home should run.
	Version string `json:"version,omitempty"`
	// Image is what the version runs from, when the target names one.
	Image string `json:"image,omitempty"`
	// Command is the version's command, when the target names one.
	Command []string `json:"command,omitempty"`
	// Ref is the control plane's own handle from its last answer.
	Ref string `json:"ref,omitempty"`
	// Options are the home's per-home options from wakegate's config,
	// passed through as they are.
	Options json.RawMessage `json:"options,omitempty"`
	// Deadline is when wakegate stops waiting for this operation.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Answer is the JSON body of every answer from the control plane: the
// home's state on success (200, 202), a code and a reason on an error.
type Answer struct {
	// State is the home's state: running, starting, suspended, stopped,
	// failed (and the aliases NormalizeState knows).
	State string `json:"state,omitempty"`
	// Endpoint is the home's base URL, required with state running.
	Endpoint string `json:"endpoint,omitempty"`
	// Version is the version the home really runs, if the control plane
	// knows it.
	Version string `json:"version,omitempty"`
	// Ref is the control plane's handle for the home (a machine id); it
	// is stored and sent back in Request.Ref.
	Ref string `json:"ref,omitempty"`
	// Reason says why, for people: why the home failed, why the request
	// was refused.
	Reason string `json:"reason,omitempty"`
	// Code is a stable snake_case code for an error answer.
	Code string `json:"code,omitempty"`
	// RetryAfter, in seconds, says when to try again; the Retry-After
	// header says the same and wins when both are present.
	RetryAfter float64 `json:"retry_after,omitempty"`
}

// phase is where a home is, normalised from a control plane's state.
type phase int

const (
	phaseUnknown phase = iota
	phaseRunning
	phaseStarting // starting, resuming, being recreated: wait
	phaseSuspended
	phaseStopped
	phaseFailed
)

// stateAliases maps the states control planes commonly report to phases.
var stateAliases = map[string]phase{
	"running": phaseRunning, "started": phaseRunning, "ready": phaseRunning, "active": phaseRunning,
	"starting": phaseStarting, "pending": phaseStarting, "created": phaseStarting,
	"creating": phaseStarting, "resuming": phaseStarting, "waking": phaseStarting,
	"replacing": phaseStarting, "recreating": phaseStarting, "booting": phaseStarting,
	"suspended": phaseSuspended, "paused": phaseSuspended, "standby": phaseSuspended,
	"suspending": phaseSuspended, "pausing": phaseSuspended, "hibernated": phaseSuspended,
	"stopped": phaseStopped, "stopping": phaseStopped, "destroyed": phaseStopped,
	"terminated": phaseStopped, "exited": phaseStopped, "off": phaseStopped,
	"failed": phaseFailed, "error": phaseFailed, "crashed": phaseFailed,
}

func phaseOf(state string) phase {
	return stateAliases[strings.ToLower(strings.TrimSpace(state))]
}

// NormalizeState maps a control plane's state to a provider state:
// paused and standby are suspended, started is running, destroyed is
// stopped, and so on. A home still starting is unknown to the engine (it
// is neither serving nor asleep); so is a state nobody knows.
func NormalizeState(state string) provider.State {
	switch phaseOf(state) {
	case phaseRunning:
		return provider.StateRunning
	case phaseSuspended:
		return provider.StateSuspended
	case phaseStopped:
		return provider.StateStopped
	case phaseFailed:
		return provider.StateFailed
	}
	return provider.StateUnknown
}

// WriteAnswer writes a as JSON with status, and a Retry-After header when
// a.RetryAfter is set: the way a Go control plane answers wakegate.
func WriteAnswer(w http.ResponseWriter, status int, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	if a.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(a.RetryAfter))))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
