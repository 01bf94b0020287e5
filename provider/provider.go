// Package provider is the seam between the wake engine and what runs homes:
// the Provider contract every provider implements, the optional interfaces
// some add (registry.go; local.go for homes on the gateway's own machine;
// health.go for a runtime's own health checks, and the wake's wait on them),
// the Registry of factories (package all builds the gateway's), the
// static provider, and what every provider shares: HomeClient and
// VersionText for what a home answers, ResolveSecret. Each provider that
// runs homes has a package of its own below this one: exec (package
// execprov, local processes), docker, fly and httpprov.
//
// DESIGN rules that live here: 31's common part (a home's answers reach
// neither an internal address nor the operator unescaped: HomeClient
// follows no redirect, VersionText bounds and escapes a version); 11's
// health rung as providers report it (HealthReporter: none, starting,
// healthy, unhealthy with the check's output, for operators only).
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// ErrUnsupported is returned by an operation a provider cannot perform
// (for example Suspend on a provider that can only stop). Callers fall back.
var ErrUnsupported = errors.New("provider: operation not supported")

// State is what a provider reports about a home.
type State string

// Provider states.
const (
	StateRunning   State = "running"
	StateSuspended State = "suspended"
	StateStopped   State = "stopped"
	StateFailed    State = "failed"
	StateUnknown   State = "unknown"
)

// Spec names a home to a provider.
type Spec struct {
	ID      string // home id
	Target  string // the name in /node/{target}
	Version string // the version to run
	// Ref is the provider's handle from the last Result (may be empty).
	Ref string
	// Image is what an image-based provider runs Version from (the roll
	// target's image, stored with the home); "" for the provider's default.
	// The exec provider ignores it.
	Image string
	// Command, when set, overrides the provider's command template for
	// this call: the home's own command, or else the command of Version
	// (a roll target's). Nil: the provider's template.
	Command []string
	// Env is the home's own extra KEY=VALUE entries, added after the
	// provider's.
	Env []string
	// Dir is the home's working directory; "" for the provider's default.
	Dir string
	// RelayToken is the home's own relay token (the resolved secret the
	// gateway sends it in the relay header), for a provider that hands it
	// to the home (exec: WAKEGATE_RELAY_TOKEN); "" for none.
	RelayToken string
	// Options are the home's provider-specific settings (a JSON object,
	// checked by the provider's Factory.CheckHome; decode them with
	// DecodeOptions). Empty: none.
	Options json.RawMessage
	// BeforeStart, when set on a Wake of a provider that is a
	// StartGater, is what must succeed before the home's process starts
	// or resumes: the wake's record saying the home is waking, written
	// while the provider prepares the start. The provider calls it (it
	// may be called again: each call returns the first's result) after
	// its preparations and before it starts, resumes or lets go of any
	// process of the home; when it fails, Wake returns its error having
	// started and resumed nothing. Nil: nothing to wait for.
	BeforeStart func() error
}

// StartGater is a provider whose Wake calls Spec.BeforeStart before it
// starts or resumes anything: the wake engine writes the record saying the
// home is waking while such a provider prepares the start (its folders,
// socket, log and cgroup), instead of before it. A Wake that finds the home
// running may return without calling it.
type StartGater interface {
	Provider
	// GatesStart reports whether Wake honours Spec.BeforeStart.
	GatesStart() bool
}

// Result is the outcome of a wake or recreate, or of a status query.
type Result struct {
	Endpoint string // upstream base URL, e.g. http://127.0.0.1:40123
	Ref      string // the provider's new handle; persisted by the caller
	State    State
	Reason   string // why State is failed, for people
	// WasRunning, on a Wake's Result, says that the home was found running
	// and nothing was started or resumed: the wake only re-verifies it,
	// and is not counted or shown as a cold wake. False when unknown.
	WasRunning bool
	// Queued, on a Wake's Result, says that connections to Endpoint wait
	// in the home's accept queue until it serves (a socket bound before
	// the home started: socket activation), so a request may be sent
	// before the home is proven ready: it is answered once the home
	// accepts. False when a connection made before the home listens is
	// refused.
	Queued bool
}

// Provider is one way of running homes.
//
// Contract: safe for concurrent use, but the caller (the wake engine) holds
// the home's lifecycle lock, so calls for one home never overlap. Every
// method honours ctx. Wake returns as soon as the home has been started or
// resumed; readiness is proven by the caller's probe, not here.
type Provider interface {
	// Name is the provider's config name, e.g. "exec".
	Name() string
	// Wake starts or resumes the home and returns where it listens. A home
	// already running is returned as is.
	Wake(ctx context.Context, s Spec) (Result, error)
	// Suspend pauses the home keeping its memory where the provider can;
	// ErrUnsupported otherwise.
	Suspend(ctx context.Context, s Spec) error
	// Stop stops the home. proven reports whether the provider verified that
	// it is gone (for exec: the recorded process has exited).
	Stop(ctx context.Context, s Spec) (proven bool, err error)
	// Recreate replaces the home with one running s.Version (and s.Command
	// or image), keeping its data, and starts it.
	Recreate(ctx context.Context, s Spec) (Result, error)
	// Version asks the running home which version it really runs.
	Version(ctx context.Context, s Spec) (string, error)
	// Status reports the home's current state without changing it.
	Status(ctx context.Context, s Spec) (Result, error)
}

// QueueFailer is a provider whose homes can queue connections while they
// boot (Result.Queued). FailQueued fails every connection waiting in home
// s's accept queue, each one reset, and keeps the socket for the home's
// next start: a wake that sent callers to a home before it was proven
// ready, and then failed, ends their requests at once instead of leaving
// them to the home's next process.
type QueueFailer interface {
	FailQueued(s Spec) error
}

// BudgetResetter is a provider that keeps a restart budget per home (exec:
// so many restarts in a window, then the home is failed). An operator's
// start resets the home's budget history, so the home gets its full budget
// again.
type BudgetResetter interface {
	// ResetBudget forgets the restarts counted against home id's budget
	// and the failure they led to. Safe for concurrent use.
	ResetBudget(id string)
}

// NormalizeState maps a provider's own word for a home's state onto a
// State: paused, standby, hibernated, sleeping and the like are suspended;
// started and active are running; stopped, exited, terminated and
// destroyed are stopped; error and crashed are failed. Case is ignored;
// anything else (starting, replacing, an unknown word) is unknown, for the
// engine to find out by a wake.
func NormalizeState(s string) State {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "running", "started", "active", "up":
		return StateRunning
	case "suspended", "suspending", "paused", "standby", "hibernated", "hibernating", "sleeping", "asleep", "frozen":
		return StateSuspended
	case "stopped", "stopping", "exited", "terminated", "destroyed", "created", "down", "off":
		return StateStopped
	case "failed", "error", "crashed":
		return StateFailed
	}
	return StateUnknown
}
