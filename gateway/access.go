package gateway

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/route"
)

// newGate builds the access gate of g's config (route.Gate: the policies
// and limiter tables) and registers its metrics.
func (g *Gateway) newGate() error {
	cfg := g.cfg
	ip := g.clientIP()
	log := g.log.With("component", "access")
	set, err := access.NewSet(cfg.Access, ip.Of, func(err error) { log.Warn("access policy", "err", err) })
	if err != nil {
		return err
	}
	g.denials = control.NewDenials(control.DenialsKept)
	gt := route.NewGate(set, access.NewLimits(cfg.Limits), ip, cfg.Limits.ClientRate > 0, g.denials, g.metrics)
	lim := gt.Limits()
	size := func(pick func(c, w, h int) int) func() float64 {
		return func() float64 { c, w, h := lim.Sizes(); return float64(pick(c, w, h)) }
	}
	if err := g.metrics.Register(gt.Denied(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_limiter_clients",
			Help: "Entries of the per-client rate limiter table (bounded by limits.max_clients)."},
			size(func(c, _, _ int) int { return c })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_limiter_homes",
			Help: "Entries of the per-home wake rate limiter table."},
			size(func(_, w, _ int) int { return w })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_limiter_waiting_homes",
			Help: "Homes with callers waiting for their wake."},
			size(func(_, _, h int) int { return h }))); err != nil {
		return fmt.Errorf("access metrics: %w", err)
	}
	for _, s := range []string{"client", "wake", "waiting"} {
		g.metrics.RateLimited(s)
	}
	if set.Default() == access.PolicyPublic {
		g.log.Info("access.default is public: every home and app that no access rule names is open to anyone")
	}
	g.gate = gt
	return nil
}

// admitWake is the engine's wake admission (wake.Options.AdmitWake): the
// gate's wake rate, once the gate exists.
func (g *Gateway) admitWake(id string) time.Duration { return g.gate.AdmitWake(id) }

// clientIP is the gateway's one client-address resolver: limits, the
// per-client connection cap, the proxy's X-Forwarded-For and the logs all
// name the same client for a request.
func (g *Gateway) clientIP() access.ClientIP {
	c := access.ClientIP{Header: g.cfg.Access.ClientIPHeader}
	if len(g.cfg.Server.TrustedNets()) > 0 { // server.trusted_proxies is restart-only
		c.Trusted = trustedProxies(g.cfg.Server.TrustedNets()).hasAddr
	}
	return c
}
