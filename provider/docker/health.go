package docker

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
)

// Health reads the home's container's HEALTHCHECK as the engine reports it
// (inspect: State.Health): none when the image or the container has no
// check (no Health, or an empty or "none" status: Podman reports a
// container without a check so), starting while the check has not passed
// yet, healthy, or unhealthy with the last check's exit code and output.
// A container that is gone or not running has no health to report: none,
// and the wake's probe finds out why.
func (p *Provider) Health(ctx context.Context, s provider.Spec) (provider.Health, error) {
	ref := s.Ref
	if ref == "" {
		ref = p.containerName(s.ID)
	}
	c, err := p.inspect(ctx, "health", s.ID, ref)
	if err != nil || c == nil || !c.State.Running {
		return provider.Health{}, err
	}
	return containerHealth(p.containerName(s.ID), c.State.Health), nil
}

// containerHealth maps the engine's health of container name onto a
// provider.Health.
func containerHealth(name string, h *container.Health) provider.Health {
	if h == nil {
		return provider.Health{}
	}
	out := provider.Health{Subject: "container " + name}
	switch h.Status {
	case container.Starting:
		out.Status = provider.HealthStarting
	case container.Healthy:
		out.Status = provider.HealthHealthy
	case container.Unhealthy:
		out.Status = provider.HealthUnhealthy
		out.Reason = lastCheck(h)
	default: // "", "none": no check runs
		return provider.Health{}
	}
	return out
}

// lastCheck says how the container's last health check ended: its exit
// code and its output, trimmed and escaped.
func lastCheck(h *container.Health) string {
	if len(h.Log) == 0 || h.Log[len(h.Log)-1] == nil {
		return fmt.Sprintf("the health check failed %d times in a row (the engine kept no output)", h.FailingStreak)
	}
	r := h.Log[len(h.Log)-1]
	msg := fmt.Sprintf("the health check exited with code %d", r.ExitCode)
	if o := strings.TrimSpace(r.Output); o != "" {
		msg += ": " + fault.Excerpt(o)
	}
	return msg
}

var _ provider.HealthReporter = (*Provider)(nil)
