package fly

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
)

// Check statuses of the Machines API.
const (
	checkPassing  = "passing"
	checkCritical = "critical"
)

// Health reads the machine's health checks from the Machines API (GET
// machine: "checks"): none when the machine declares no check or is not
// started, unhealthy when a check is critical (its name and last output
// as the reason), starting while any other is not passing yet (warning,
// or no status yet), healthy when all pass. A check that fails while the
// home boots is critical too: a check's grace_period keeps it from
// failing the wake.
func (p *Provider) Health(ctx context.Context, s provider.Spec) (provider.Health, error) {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	_, m, err := p.machineNow(ctx, s)
	if err != nil {
		return provider.Health{}, wrap("health", fmt.Errorf("health of %s: %w", s.ID, err))
	}
	if m.State != stateStarted {
		return provider.Health{}, nil
	}
	return machineHealth(m), nil
}

// machineHealth maps machine m's checks onto a provider.Health.
func machineHealth(m machine) provider.Health {
	if len(m.Checks) == 0 {
		return provider.Health{}
	}
	out := provider.Health{Subject: "machine " + m.ID, Status: provider.HealthHealthy}
	for _, c := range m.Checks {
		switch c.Status {
		case checkPassing:
		case checkCritical:
			out.Status = provider.HealthUnhealthy
			out.Reason = fmt.Sprintf("check %s is critical: %s", fault.Excerpt(c.Name), fault.Excerpt(c.Output))
			return out
		default:
			out.Status = provider.HealthStarting
		}
	}
	return out
}

var _ provider.HealthReporter = (*Provider)(nil)
