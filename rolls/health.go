package rolls

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/provider"
)

// ReasonUnhealthy is the provider.Error reason of a release whose runtime
// health check failed during a roll.
const ReasonUnhealthy = "unhealthy"

// Healthy holds a roll or its rollback to the runtime's own health check
// of the home just recreated on a release (s, with the ref the recreate
// returned), where prov reports one (provider.HealthReporter): the same
// health rung a wake climbs before its probe (DESIGN rule 11). While a
// check is still unknown it waits, calling pending once; a check that
// failed is a failed attempt (rule 10: the target is then recorded bad
// and the home rolled back), its error carrying the check's output and a
// hint for the operator. No check, or a provider that runs none, passes:
// the probe through the real path decides, as it always does last (rules
// 3 and 9). A roll calls it before the probe and again after the version
// assert, so that a check that failed meanwhile is not committed. Bounded
// by ctx, the attempt's budget.
func Healthy(ctx context.Context, prov provider.Provider, s provider.Spec, pending func()) error {
	hr, ok := prov.(provider.HealthReporter)
	if !ok {
		return nil
	}
	h, err := provider.AwaitHealth(ctx, hr, s, pending)
	if err != nil {
		return fmt.Errorf("waiting for the runtime's health check: %w", err)
	}
	if h.Status != provider.HealthUnhealthy {
		return nil
	}
	return &provider.Error{Op: "health", Reason: ReasonUnhealthy,
		Hint: fmt.Sprintf("%s on version %s reports its health check failing (%s): fix the release or its check", h.Subject, s.Version, h.Reason),
		Err:  fmt.Errorf("%s is unhealthy: %s", h.Subject, h.Reason)}
}
