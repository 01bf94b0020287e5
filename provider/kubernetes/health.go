package kubernetes

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// Health reads the home's pod from the watch, the rung before the
// gateway's probe: healthy when its Ready condition is True, starting
// while it is scheduled or running but not ready yet, unhealthy when a
// container cannot pull its image (naming it), keeps crashing (with its
// last exit: OOMKilled, the exit code), or cannot be made; none when the
// home has no pod. s.Ref, the pod the wake found, is read first, then
// the newest.
func (p *Provider) Health(ctx context.Context, s provider.Spec) (provider.Health, error) {
	o, err := p.home(s)
	if err != nil {
		return provider.Health{}, err
	}
	sel, err := p.selector(ctx, "health", s.ID, o)
	if err != nil {
		return provider.Health{}, err
	}
	var h provider.Health
	err = p.pods(o.Namespace).snapshot(ctx, func(pods map[string]*kapi.Pod) {
		live := byPreference(homePods(pods, o, sel, false), s.Ref)
		if len(live) == 0 {
			return
		}
		h = podHealth(live[0])
	})
	return h, err
}

// podHealth is what pod's status says of its health.
func podHealth(pod *kapi.Pod) provider.Health {
	h := provider.Health{Subject: "pod " + pod.Metadata.Namespace + "/" + pod.Metadata.Name}
	if why := problem(pod); why != nil {
		h.Status, h.Reason = provider.HealthUnhealthy, why.Hint
		return h
	}
	if pod.Ready() {
		h.Status = provider.HealthHealthy
		return h
	}
	h.Status = provider.HealthStarting
	if c, ok := pod.Condition("Ready"); ok && c.Reason != "" {
		h.Reason = fmt.Sprintf("not ready: %s %s", c.Reason, c.Message)
	}
	return h
}

var _ provider.HealthReporter = (*Provider)(nil)
