package appstatus

import (
	"context"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// HomeHealth is the capability of a Homes whose homes' runtimes run their
// own health checks (a container's HEALTHCHECK, a Fly machine's checks):
// HomeHealth says what they report of home id, none when its provider
// runs none (*wake.Engine implements it). The ladder asks for it with a
// type assertion; a Homes without it skips the runtime's rung.
type HomeHealth interface {
	HomeHealth(ctx context.Context, id string) (provider.Health, error)
}

// runtimeHealthRung reads the runtime's own health check of the app's home
// (rule 11's health rung, before the gateway's direct check and its
// self-probe, which still decide last): a check still unknown is
// starting/health-pending, a check that failed is failed/unhealthy with
// the check's output in the message and the likely fix in the hint, both
// for operators only. No check, a passing one, an app outside any home or
// a read that failed pass: the checks after it judge the app alone.
func (a *Apps) runtimeHealthRung(ctx context.Context, s registry.App) rung {
	hh, ok := a.o.Homes.(HomeHealth)
	if s.Home == "" || !ok {
		return rung{pass: true}
	}
	h, err := hh.HomeHealth(ctx, s.Home)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return rung{st: appStatus(s, PhaseUnknown, ReasonNotObserved, "the observation ran out of time")}
		}
		return rung{pass: true}
	case h.Status == provider.HealthStarting:
		return rung{st: appStatus(s, PhaseStarting, ReasonHealthPending,
			"home %s runs; its runtime's health check (%s) has not passed yet", s.Home, h.Subject)}
	case h.Status == provider.HealthUnhealthy:
		st := appStatus(s, PhaseFailed, ReasonUnhealthy, "home %s: %s reports its health check failing: %s", s.Home, h.Subject, h.Reason)
		st.Hint = "fix the home or its health check; the app is checked again by itself, and passes once the runtime reports it healthy"
		return rung{st: st}
	}
	return rung{pass: true}
}
