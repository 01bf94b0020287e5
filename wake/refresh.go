package wake

import (
	"context"
	"errors"
	"fmt"
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

// EventRefresh is published when a refresh changed a home's record or
// dropped its verdict; Reason is the provider's state, Message what
// changed.
const EventRefresh = "home.refreshed"

// What a refresh changed (RefreshResult.Changed).
const (
	ChangedStatus   = "status"
	ChangedVerdict  = "verdict_dropped"
	ChangedEndpoint = "endpoint"
)

// refreshLease is the lease of a refresh's lifecycle lock, and
// refreshTimeout bounds a refresh once its lock is held.
const (
	refreshLease   = time.Minute
	refreshTimeout = 30 * time.Second
)

// RefreshResult is what a refresh of one home found and did.
type RefreshResult struct {
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

// Refresh asks home id's provider for the home's state and makes the
// stored record agree (see the top of this file). It returns what it found
// and did; a provider that does not answer is no error (the result says
// unknown, why, and the likely fix). fault.NotFound for an unknown home,
// fault.Busy while a wake or another operation on the home runs.
func (e *Engine) Refresh(ctx context.Context, id string) (RefreshResult, error) {
	return e.refresh(ctx, id, "admin")
}

// refresh is Refresh with the cause its event and log line carry: "admin"
// for an operator's, "adopt" for the pass at start (refresh_start.go).
func (e *Engine) refresh(ctx context.Context, id, cause string) (RefreshResult, error) {
	h := e.home(id)
	if h == nil {
		return RefreshResult{}, errHomeNotFound(id)
	}
	h.mu.Lock()
	waking := h.flight != nil
	h.mu.Unlock()
	if waking {
		return RefreshResult{}, errBusy(fmt.Errorf("refresh %s: a wake of the home is in progress; it records what it finds", id))
	}
	var res RefreshResult
	err := e.runLocked(ctx, h, lifecycleOp{name: "refresh", lease: refreshLease, detach: refreshTimeout,
		run: func(ctx context.Context, l *held) error {
			var err error
			res, err = l.refresh(ctx)
			return err
		}})
	if err != nil {
		return RefreshResult{}, err
	}
	e.reportRefresh(res, cause)
	return res, nil
}

// refresh reads the provider's state of the home and reconciles the
// record read under the lock with it.
func (l *held) refresh(ctx context.Context) (RefreshResult, error) {
	e, h := l.e, l.h
	res := RefreshResult{Home: h.spec.ID, Before: l.rec.Status, After: l.rec.Status}
	prov, ok := e.o.Providers[l.rec.Provider]
	if !ok {
		return res, fmt.Errorf("refresh %s: unknown provider %q", h.spec.ID, l.rec.Provider)
	}
	if runner, err := e.runnerElsewhere(ctx, l.rec); err != nil || runner != "" {
		if err != nil {
			return res, fmt.Errorf("refresh %s: %w", h.spec.ID, err)
		}
		// Its provider here knows nothing of a process another gateway
		// runs (owner.go): that gateway's refresh is the one to ask.
		res.Provider = provider.StateUnknown
		res.Message = "the home's process is run by gateway " + runner + "; refresh it there. Nothing was changed"
		return res, nil
	}
	spec := h.providerSpec(l.rec, l.rec.Version, e.roll.releaseOf(l.rec))
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
		return res, l.refreshDown(ctx, &res)
	case provider.StateRunning:
		return res, l.refreshUp(ctx, &res, st)
	}
	res.Message = "the provider reports a state the gateway cannot name; nothing was changed (the next wake settles it)"
	return res, nil
}

// refreshDown records that the provider has the home down (res.Provider is
// suspended, stopped or failed).
func (l *held) refreshDown(ctx context.Context, res *RefreshResult) error {
	h := l.h
	if h.warm.Swap(nil) != nil {
		res.Changed = append(res.Changed, ChangedVerdict)
	}
	want, reason := registry.StatusSuspended, ""
	if res.Provider == provider.StateFailed {
		want, reason = registry.StatusFailed, res.Reason
		if reason == "" {
			reason = "the provider reports the home failed"
		}
	}
	if l.rec.Status == want || (!mayRun(l.rec.Status) && want == registry.StatusSuspended) {
		res.Message = fmt.Sprintf("the provider reports the home %s and the record says %s: nothing to change", res.Provider, res.Before)
		if len(res.Changed) > 0 {
			res.Message += "; its stale verdict was dropped"
		}
		return nil
	}
	if err := l.saveRetry(ctx, func(r *registry.Home) {
		r.Status, r.Reason = want, reason
		r.Verdict = registry.VerdictNone
		r.WantRunning = false
	}); err != nil {
		return fmt.Errorf("refresh %s: record the provider's state: %w", h.spec.ID, err)
	}
	if want == registry.StatusFailed {
		h.mu.Lock()
		h.failed = reason
		h.mu.Unlock()
	}
	res.After = l.rec.Status
	res.Changed = append(res.Changed, ChangedStatus)
	res.Message = fmt.Sprintf("the record said %s but the provider reports the home %s: the record now says %s and the next request wakes the home",
		res.Before, res.Provider, res.After)
	return nil
}

// refreshUp records that the provider has the home running, at st's
// endpoint when it names one. No verdict is granted: the next request
// proves the home through the wake path.
func (l *held) refreshUp(ctx context.Context, res *RefreshResult, st provider.Result) error {
	e, h := l.e, l.h
	moved := st.Endpoint != "" && st.Endpoint != l.rec.Endpoint
	if l.rec.Status == registry.StatusRunning && !moved {
		res.Message = "the provider reports the home running, as the record says"
		return nil
	}
	if h.warm.Swap(nil) != nil {
		res.Changed = append(res.Changed, ChangedVerdict)
	}
	wasDown := l.rec.Status != registry.StatusRunning
	if err := l.saveRetry(ctx, func(r *registry.Home) {
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
		return fmt.Errorf("refresh %s: record the provider's state: %w", h.spec.ID, err)
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
		e.o.Sessions.Touch(h.spec.ID)
		h.mu.Lock()
		h.failed = ""
		h.mu.Unlock()
	}
	res.After = l.rec.Status
	res.Message = "the provider reports the home running " + strings.Join(said, " and ") +
		": the record now says running, with no verdict until the next request proves the home ready"
	return nil
}

// reportRefresh writes the refresh's log line and, when it changed
// something, its event.
func (e *Engine) reportRefresh(res RefreshResult, cause string) {
	attrs := []any{"home", res.Home, "cause", cause, "before", string(res.Before), "provider", string(res.Provider),
		"after", string(res.After), "changed", strings.Join(res.Changed, ","), "message", res.Message}
	outcome := "unchanged"
	switch {
	case res.Provider == provider.StateUnknown:
		outcome = "unknown"
	case len(res.Changed) > 0:
		outcome = "changed"
	}
	e.o.Metrics.Refreshed(outcome)
	switch {
	case res.Provider == provider.StateUnknown:
		attrs = append(attrs, "reason", res.Reason)
		if res.Hint != "" {
			attrs = append(attrs, "hint", res.Hint)
		}
		e.o.Log.Warn("refresh", attrs...)
	case len(res.Changed) > 0:
		e.o.Log.Info("refresh", attrs...)
	default:
		e.o.Log.Debug("refresh", attrs...)
	}
	if len(res.Changed) > 0 {
		e.o.Events.Publish(events.Event{Type: EventRefresh, Home: res.Home, Cause: cause, Reason: string(res.Provider),
			Phase: string(res.After), Message: res.Message})
	}
}
