package provider

import (
	"context"
	"errors"
	"time"
)

// HealthStatus is what a runtime's own health check says of a home: the
// first rung of the readiness ladder (DESIGN rule 11), read before the
// gateway's own probe, which still decides last (rule 3).
type HealthStatus string

// Health statuses. The zero value is HealthNone.
const (
	// HealthNone: the runtime runs no check for the home (none is
	// configured, or it reports an empty status). The probe alone decides.
	HealthNone HealthStatus = ""
	// HealthStarting: checks are present and one is still unknown (it has
	// not passed yet, or runs in its start period): health-pending.
	HealthStarting HealthStatus = "starting"
	// HealthHealthy: every check passes.
	HealthHealthy HealthStatus = "healthy"
	// HealthUnhealthy: a check failed for good; Health.Reason says why.
	HealthUnhealthy HealthStatus = "unhealthy"
)

// Health is a runtime's report of a home's own health checks.
type Health struct {
	Status HealthStatus
	// Subject names what the runtime checks, for an operator: the
	// container's or the machine's name.
	Subject string
	// Reason is, when Status is HealthUnhealthy, the runtime's word for
	// it: the last check's output and exit code, trimmed and escaped
	// (fault.Excerpt). It comes from the home: for operators only, never
	// a public answer (DESIGN rule 23).
	Reason string
}

// HealthReporter is a provider whose runtime runs a home's own health
// checks (a container's HEALTHCHECK, a Fly machine's checks) and can say
// what they report. Health reads them without changing anything; s.Ref is
// the handle the last wake returned. An error is a failed read (the
// runtime did not answer), not an unhealthy home.
type HealthReporter interface {
	Health(ctx context.Context, s Spec) (Health, error)
}

// Health polling bounds: the first read after healthFirst, then twice as
// long each time up to healthMax. A runtime tells nobody when a check
// changes, so this is the one poll of the wake; it ends with ctx.
const (
	healthFirst = 50 * time.Millisecond
	healthMax   = time.Second
)

// AwaitHealth reads hr's health of home s until it is no longer starting,
// and returns that last report: none, healthy or unhealthy. pending is
// called once, when the first report says starting, so the caller can
// show the wait (health-pending). A read that fails is tried again at the
// next tick; when ctx ends first, AwaitHealth returns the last report and
// ctx's error, joined with the last read's when that read failed.
func AwaitHealth(ctx context.Context, hr HealthReporter, s Spec, pending func()) (Health, error) {
	var (
		last    Health
		lastErr error
		told    bool
	)
	wait := healthFirst
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, errors.Join(ctx.Err(), lastErr)
		case <-t.C:
		}
		h, err := hr.Health(ctx, s)
		switch {
		case err != nil:
			lastErr = err
		case h.Status != HealthStarting:
			return h, nil
		default:
			last, lastErr = h, nil
			if !told && pending != nil {
				told = true
				pending()
			}
		}
		t.Reset(wait)
		wait = min(2*wait, healthMax)
	}
}
