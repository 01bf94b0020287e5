package gateway

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/edge"
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
	g.denials = adminapi.NewDenials(adminapi.DenialsKept)
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
	for _, s := range []string{"client", "conn", "wake", "waiting"} {
		g.metrics.RateLimited(s)
	}
	if cfg.Limits.ConnRate > 0 {
		g.connLimit.SetRate(g.connRate(lim))
	}
	if set.Default() == access.PolicyPublic {
		g.log.Info("access.default is public: every home and app that no access rule names is open to anyone")
	}
	g.gate = gt
	return nil
}

// connRate is the public listener's connection rate (limits.conn_rate):
// it takes each new connection of a client from lim, and counts and logs
// the ones refused, at most one log line per second (a flood would
// otherwise write one per connection), with the setting to raise.
func (g *Gateway) connRate(lim *access.Limits) func(ip netip.Addr) time.Duration {
	counter := g.metrics.RateLimited("conn")
	var lastLog atomic.Int64
	var since atomic.Int64
	return func(ip netip.Addr) time.Duration {
		d := lim.Conn(ip.String())
		if d <= 0 {
			return 0
		}
		counter.Inc()
		since.Add(1)
		now := time.Now().UnixNano()
		if last := lastLog.Load(); now-last >= int64(time.Second) && lastLog.CompareAndSwap(last, now) {
			g.log.Info("connection limited", "scope", "conn", "client", ip.String(), "refused", since.Swap(0),
				"retry_after", d.Round(time.Millisecond),
				"hint", "the client opened connections faster than limits.conn_rate and limits.conn_burst allow: "+
					"raise them if this client is not a flood (a proxy in front? list it in server.trusted_proxies)")
		}
		return d
	}
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
		c.Trusted = edge.TrustedProxies(g.cfg.Server.TrustedNets()).HasAddr
	}
	return c
}

// registerBodyBudget registers the body budget's figures (proxy/budget.go)
// as metrics.
func (g *Gateway) registerBodyBudget() error {
	p := g.proxy
	err := g.metrics.Register(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_body_budget_bytes",
			Help: "Bytes request bodies being read ahead hold now, in memory and spool files " +
				"(bounded by proxy.body_budget_client per client and proxy.body_budget_total)."},
			func() float64 { return float64(p.BodyBudget().Used) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "wakegate_body_budget_clients",
			Help: "Client addresses whose request bodies are being read ahead."},
			func() float64 { return float64(p.BodyBudget().Clients) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "wakegate_body_budget_refused_total",
			Help: "Request bodies refused for the body budget (503 body_budget_full or 413 body_over_budget)."},
			func() float64 { return float64(p.BodyBudget().Refused) }))
	if err != nil {
		return fmt.Errorf("body budget metrics: %w", err)
	}
	return nil
}
