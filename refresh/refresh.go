package refresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// A refresh asks a home's provider what state the home is in
// (Provider.Status) and makes the stored record agree with the answer. It
// runs under the home's lifecycle lock, like a wake or a suspend, so it
// never races one; it is refused as busy while another operation holds the
// lock or a wake is in flight (that operation settles the record itself).
//
//   - The provider says suspended, stopped or failed while the record says
//     the home may run: the warm verdict is dropped (in a fleet every
//     gateway drops its own: the refresh event is announced like a
//     suspend's), the record says suspended (or failed, with the
//     provider's reason), and the home's app routes go the way they go
//     after a suspend (the app observer withdraws them).
//   - The provider says running while the record says the home sleeps:
//     the record says running, with no verdict. A refresh never proves a
//     home ready: the next request runs the one readiness probe through
//     the real wake path (coalesced with its other callers, bounded by the
//     ready timeout, its failure stopping the half-woken home), which is
//     the only place a verdict is granted. A refresh stays a provider read
//     and a record write.
//   - The provider says running at another endpoint than the record's: the
//     new endpoint and ref are recorded and the verdict is dropped.
//   - The provider does not answer, or answers a state it cannot name
//     (unknown): nothing changes, and the result says why.

// Event is published when a refresh changed a home's record or dropped its
// verdict; Reason is the provider's state, Message what changed.
const Event = "home.refreshed"

// What a refresh changed (Result.Changed).
const (
	ChangedStatus   = "status"
	ChangedVerdict  = "verdict_dropped"
	ChangedEndpoint = "endpoint"
)

// Lease is the lease of a refresh's lifecycle lock, and Timeout bounds a
// refresh once its lock is held.
const (
	Lease   = time.Minute
	Timeout = 30 * time.Second
)

// Result is what a refresh of one home found and did.
type Result struct {
	Home string `json:"home"`
	// Before and After are the stored status before and after the refresh.
	Before registry.Status `json:"before"`
	After  registry.Status `json:"after"`
	// Provider is the state the provider reported, normalised (running,
	// suspended, stopped, failed), or unknown when it did not say.
	Provider provider.State `json:"provider"`
	// Reason is the provider's reason for a failed home, or why its state
	// is unknown.
	Reason string `json:"reason,omitempty"`
	// Hint is the operator's likely fix when the provider did not answer.
	Hint string `json:"hint,omitempty"`
	// Changed lists what the refresh changed: status, verdict_dropped,
	// endpoint. Empty when the record already agreed with the provider.
	Changed []string `json:"changed,omitempty"`
	// Message is one sentence for people: what was found and what follows.
	Message string `json:"message"`
}

// Homes is the lifecycle engine as a refresh needs it.
type Homes interface {
	// Hold runs fn on home id under the home's lifecycle lock, on a
	// context bounded by Timeout once the lock is held. It is refused
	// (fault.Busy) while a wake of the home is in flight or another
	// operation holds the lock; fault.NotFound for an unknown home.
	Hold(ctx context.Context, id string, fn func(ctx context.Context, h Held) error) error
}

// Held is one home under its lifecycle lock.
type Held interface {
	// ID is the home's id.
	ID() string
	// Record is the home's record as read under the lock and last saved.
	Record() registry.Home
	// Provider returns the home's provider and its spec of the home at
	// the record's version; an error for a provider the engine lacks.
	Provider() (provider.Provider, provider.Spec, error)
	// RunnerElsewhere names the live gateway of the fleet that runs the
	// home's process, "" when none but this one does.
	RunnerElsewhere(ctx context.Context) (string, error)
	// MayRun reports whether the record's status says the home may have a
	// running process.
	MayRun() bool
	// DropVerdict drops the home's warm verdict and reports whether it
	// had one.
	DropVerdict() bool
	// Save writes change to the record under the lock, trying again while
	// the store is briefly unavailable.
	Save(ctx context.Context, change func(*registry.Home)) error
	// SetFailed keeps reason as why the provider gave up on the home
	// ("" clears it).
	SetFailed(reason string)
	// Touch starts the home's idle clock.
	Touch()
}

// Metrics counts the refreshes.
type Metrics interface {
	// Refreshed counts a finished refresh: "changed" (the record or the
	// verdict followed the provider), "unchanged", or "unknown" (the
	// provider did not say).
	Refreshed(outcome string)
}

// Refresher refreshes homes; all its fields are needed.
type Refresher struct {
	Homes   Homes
	Metrics Metrics
	Log     *slog.Logger
	Events  *events.Bus
}

// Refresh asks home id's provider for the home's state and makes the
// stored record agree (see the top of this file), with the cause its event
// and log line carry: "admin" for an operator's, "adopt" for the pass at
// start (Queue). It returns what it found and did; a provider that does
// not answer is no error (the result says unknown, why, and the likely
// fix). fault.NotFound for an unknown home, fault.Busy while a wake or
// another operation on the home runs.
func (r *Refresher) Refresh(ctx context.Context, id, cause string) (Result, error) {
	var res Result
	err := r.Homes.Hold(ctx, id, func(ctx context.Context, h Held) error {
		var err error
		res, err = refresh(ctx, h)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	r.report(res, cause)
	return res, nil
}

// refresh reads the provider's state of the home and reconciles the
// record read under the lock with it.
func refresh(ctx context.Context, h Held) (Result, error) {
	rec := h.Record()
	res := Result{Home: h.ID(), Before: rec.Status, After: rec.Status}
	prov, spec, err := h.Provider()
	if err != nil {
		return res, fmt.Errorf("refresh %s: %w", h.ID(), err)
	}
	if runner, err := h.RunnerElsewhere(ctx); err != nil || runner != "" {
		if err != nil {
			return res, fmt.Errorf("refresh %s: %w", h.ID(), err)
		}
		// Its provider here knows nothing of a process another gateway
		// runs: that gateway's refresh is the one to ask.
		res.Provider = provider.StateUnknown
		res.Message = "the home's process is run by gateway " + runner + "; refresh it there. Nothing was changed"
		return res, nil
	}
	st, err := prov.Status(ctx, spec)
	res.Provider = provider.NormalizeState(string(st.State))
	res.Reason = st.Reason
	if err != nil {
		res.Provider, res.Reason = provider.StateUnknown, err.Error()
		var pe *provider.Error
		if errors.As(err, &pe) {
			res.Hint = pe.Hint
		}
		res.Message = "the provider did not say what state the home is in; nothing was changed"
		return res, nil
	}
	switch res.Provider {
	case provider.StateSuspended, provider.StateStopped, provider.StateFailed:
		return res, down(ctx, h, &res)
	case provider.StateRunning:
		return res, up(ctx, h, &res, st)
	}
	res.Message = "the provider reports a state the gateway cannot name; nothing was changed (the next wake settles it)"
	return res, nil
}

// down records that the provider has the home down (res.Provider is
// suspended, stopped or failed).
func down(ctx context.Context, h Held, res *Result) error {
	if h.DropVerdict() {
		res.Changed = append(res.Changed, ChangedVerdict)
	}
	want, reason := registry.StatusSuspended, ""
	if res.Provider == provider.StateFailed {
		want, reason = registry.StatusFailed, res.Reason
		if reason == "" {
			reason = "the provider reports the home failed"
		}
	}
	if h.Record().Status == want || (!h.MayRun() && want == registry.StatusSuspended) {
		res.Message = fmt.Sprintf("the provider reports the home %s and the record says %s: nothing to change", res.Provider, res.Before)
		if len(res.Changed) > 0 {
			res.Message += "; its stale verdict was dropped"
		}
		return nil
	}
	if err := h.Save(ctx, func(r *registry.Home) {
		r.Status, r.Reason = want, reason
		r.Verdict = registry.VerdictNone
		r.WantRunning = false
	}); err != nil {
		return fmt.Errorf("refresh %s: record the provider's state: %w", h.ID(), err)
	}
	if want == registry.StatusFailed {
		h.SetFailed(reason)
	}
	res.After = h.Record().Status
	res.Changed = append(res.Changed, ChangedStatus)
	res.Message = fmt.Sprintf("the record said %s but the provider reports the home %s: the record now says %s and the next request wakes the home",
		res.Before, res.Provider, res.After)
	return nil
}

// up records that the provider has the home running, at st's endpoint
// when it names one. No verdict is granted: the next request proves the
// home through the wake path.
func up(ctx context.Context, h Held, res *Result, st provider.Result) error {
	rec := h.Record()
	moved := st.Endpoint != "" && st.Endpoint != rec.Endpoint
	if rec.Status == registry.StatusRunning && !moved {
		res.Message = "the provider reports the home running, as the record says"
		return nil
	}
	if h.DropVerdict() {
		res.Changed = append(res.Changed, ChangedVerdict)
	}
	wasDown := rec.Status != registry.StatusRunning
	if err := h.Save(ctx, func(r *registry.Home) {
		if wasDown {
			r.Status, r.Reason, r.Verdict = registry.StatusRunning, "", registry.VerdictNone
			r.WantRunning = true
		}
		if moved {
			r.Endpoint = st.Endpoint
			if st.Ref != "" {
				r.ProviderRef = st.Ref
			}
		}
	}); err != nil {
		return fmt.Errorf("refresh %s: record the provider's state: %w", h.ID(), err)
	}
	var said []string
	if moved {
		res.Changed = append(res.Changed, ChangedEndpoint)
		said = append(said, "at a new endpoint")
	}
	if wasDown {
		res.Changed = append(res.Changed, ChangedStatus)
		said = append(said, "while the record said "+string(res.Before))
		// A home that runs can go idle: its idle clock starts now.
		h.Touch()
		h.SetFailed("")
	}
	res.After = h.Record().Status
	res.Message = "the provider reports the home running " + strings.Join(said, " and ") +
		": the record now says running, with no verdict until the next request proves the home ready"
	return nil
}

// report writes the refresh's log line and, when it changed something,
// its event.
func (r *Refresher) report(res Result, cause string) {
	attrs := []any{"home", res.Home, "cause", cause, "before", string(res.Before), "provider", string(res.Provider),
		"after", string(res.After), "changed", strings.Join(res.Changed, ","), "message", res.Message}
	outcome := "unchanged"
	switch {
	case res.Provider == provider.StateUnknown:
		outcome = "unknown"
	case len(res.Changed) > 0:
		outcome = "changed"
	}
	r.Metrics.Refreshed(outcome)
	switch {
	case res.Provider == provider.StateUnknown:
		attrs = append(attrs, "reason", res.Reason)
		if res.Hint != "" {
			attrs = append(attrs, "hint", res.Hint)
		}
		r.Log.Warn("refresh", attrs...)
	case len(res.Changed) > 0:
		r.Log.Info("refresh", attrs...)
	default:
		r.Log.Debug("refresh", attrs...)
	}
	if len(res.Changed) > 0 {
		r.Events.Publish(events.Event{Type: Event, Home: res.Home, Cause: cause, Reason: string(res.Provider),
			Phase: string(res.After), Message: res.Message})
	}
}
