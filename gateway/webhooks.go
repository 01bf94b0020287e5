package gateway

import (
	"fmt"

	"github.com/wakegate/wakegate/webhook"
)

// startWebhooks starts the delivery of the engine's events to the
// config's webhooks (package webhook) and registers its metrics; without
// webhooks it starts nothing. Close stops it.
func (g *Gateway) startWebhooks() error {
	ts := make([]webhook.Target, 0, len(g.cfg.Webhooks))
	for _, w := range g.cfg.Webhooks {
		ts = append(ts, webhook.Target{URL: w.URL, Events: w.Events, Key: w.SigningKey(),
			Timeout: w.Timeout, Attempts: w.Attempts, Queue: w.Queue})
	}
	g.hooks = webhook.Start(g.engine.Events(), webhook.Options{Targets: ts, Instance: g.cfg.Instance,
		Log: g.log.With("component", "webhook")})
	if err := g.metrics.Register(g.hooks.Collectors()...); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Webhooks returns the counts of each configured webhook, in the config's
// order; none without webhooks.
func (g *Gateway) Webhooks() []webhook.Stats { return g.hooks.Stats() }
