package gateway

import (
	"errors"
	"fmt"
	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/route"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
)

// gate runs the access policies and the abuse limits (package access)
// before anything wakes a home or reaches one (DESIGN rule 25).
type gate struct {
	// set is replaced whole by a reload that changes access (reload.go).
	set    atomic.Pointer[access.Set]
	limits *access.Limits
	ip     access.ClientIP
	// clientRate is whether limits.client_rate is on (a restart-only
	// setting): off, a request's client address is not resolved for it.
	clientRate bool
	denied     *prometheus.CounterVec // policy, code
	recent     *denialLog
}

// newGate builds the policies and limiter tables of g's config and
// registers their metrics.
func (g *Gateway) newGate() error {
	cfg := g.cfg
	ip := g.clientIP()
	log := g.log.With("component", "access")
	set, err := access.NewSet(cfg.Access, ip.Of, func(err error) { log.Warn("access policy", "err", err) })
	if err != nil {
		return err
	}
	gt := &gate{limits: access.NewLimits(cfg.Limits), ip: ip, recent: newDenialLog(denialsKept),
		clientRate: cfg.Limits.ClientRate > 0,
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_access_denied_total",
			Help: "Requests refused by an access policy, by policy name and public code.",
		}, []string{"policy", "code"}),
	}
	gt.set.Store(set)
	lim := gt.limits
	size := func(pick func(c, w, h int) int) func() float64 {
		return func() float64 { c, w, h := lim.Sizes(); return float64(pick(c, w, h)) }
	}
	if err := g.metrics.Register(gt.denied,
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

// close stops the policies' background work.
func (gt *gate) close() {
	if gt != nil {
		gt.set.Load().Close()
	}
}

// clientAllowed takes a request from its client's rate budget
// (limits.client_rate), for every path but the health checks and a home's
// ready signal (which its relay token authenticates); false means r was
// answered 429.
func (g *Gateway) clientAllowed(w http.ResponseWriter, r *http.Request) bool {
	if !g.gate.clientRate {
		return true
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/_wakegate/ready":
		return true
	}
	if d := g.gate.limits.Client(g.gate.ip.Of(r)); d > 0 {
		g.limited(w, r, "client", fault.New(fault.Limited, "rate_limited", "Too many requests; slow down.").WithRetry(d))
		return false
	}
	return true
}

// admit runs the access policy of a request for
// the home at target (kind "node") or the app slug (kind "app"), whose home
// is h (nil for an app outside any home). It returns false when r was
// answered (denied); else r may go on, its token query
// parameter removed and the policy's headers set.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, kind, name string, h *route.Home) bool {
	gt := g.gate
	set := gt.set.Load()
	var c access.Chosen
	s := access.Subject{Kind: kind, Name: name}
	if h != nil {
		s.Target = h.Spec().Target
		s.Owner = set.Owner(s.Target)
	}
	if kind == "node" {
		c = set.ForHome(name)
	} else {
		c = set.ForApp(name)
	}
	// The gateway's cookies go to no home, whatever policy decides the
	// route (once it has read them): under path routing every home shares
	// the visitor's cookies for this origin, so a public home would
	// otherwise read a token meant for another one.
	if c.Name == access.PolicyPublic {
		access.StripCookies(r.Header, set.GatewayCookies(), "")
		return true
	}
	d, err := c.Policy.Check(r.Context(), r, s)
	if err != nil {
		g.deny(w, r, c.Name, s, err)
		return false
	}
	access.StripCookies(r.Header, set.GatewayCookies(), c.KeepCookie)
	if p := c.QueryParam; p != "" && strings.Contains(r.URL.RawQuery, p+"=") {
		q := r.URL.Query()
		q.Del(p)
		r.URL.RawQuery = q.Encode()
	}
	for _, k := range d.Strip {
		r.Header.Del(k)
	}
	access.StripCookies(r.Header, d.DropCookies, "")
	for k, vs := range d.Header {
		r.Header[k] = vs
	}
	return true
}

// deny answers a request a policy refused, counts it and logs the reason.
func (g *Gateway) deny(w http.ResponseWriter, r *http.Request, policy string, s access.Subject, err error) {
	var reply *access.Reply
	code := "auth_reply"
	status := 0
	if errors.As(err, &reply) {
		status = reply.Status
	} else {
		c := proxy.StatusOf(err)
		code, status = c.Code, c.Status
	}
	g.gate.denied.WithLabelValues(policy, code).Inc()
	d := admin.Denial{At: time.Now().UTC(), Policy: policy, Route: s.Kind + "/" + s.Name, Status: status, Code: code,
		Reason: access.Reason(err), Client: g.gate.ip.Of(r), RequestID: r.Header.Get("X-Request-Id")}
	g.gate.recent.add(d)
	g.log.Info("access denied", "policy", policy, "route", d.Route, "status", status, "code", code,
		"reason", d.Reason, "client", d.Client, "request_id", d.RequestID)
	if reply != nil {
		reply.Write(w)
		return
	}
	proxy.WriteClassified(w, r, proxy.StatusOf(err))
}

// limited answers a request over a limit of scope and counts it.
func (g *Gateway) limited(w http.ResponseWriter, r *http.Request, scope string, err *fault.Error) {
	g.metrics.RateLimited(scope).Inc()
	g.log.Info("request limited", "scope", scope, "path", r.URL.Path, "client", g.gate.ip.Of(r),
		"retry_after", err.RetryAfter.Round(time.Millisecond), "request_id", r.Header.Get("X-Request-Id"))
	proxy.WriteClassified(w, r, proxy.StatusOf(err))
}

// admitWake takes one wake of home id from its wake rate (limits.wake_rate):
// 0 lets the wake start, else how long until one would be allowed. The
// engine asks it only for a wake a request starts, so callers that join
// a wake in flight are never refused by it.
func (g *Gateway) admitWake(id string) time.Duration {
	if g.gate == nil {
		return 0
	}
	d := g.gate.limits.Wake(id)
	if d > 0 {
		g.metrics.RateLimited("wake").Inc()
	}
	return d
}

// waitSlot counts a caller waiting for home id's wake; false (with r
// answered 503) past limits.max_waiting_per_home. done ends the wait.
func (g *Gateway) waitSlot(w http.ResponseWriter, r *http.Request, id string) (done func(), ok bool) {
	done, ok = g.gate.limits.Wait(id)
	if !ok {
		g.limited(w, r, "waiting", fault.New(fault.NotReady, "too_many_waiting",
			"Too many requests are waiting for this home; try again shortly.").WithRetry(g.conf().Wake.RetryAfter))
	}
	return done, ok
}

// holdSlot counts a browser held for wake.hold before the waiting page.
// Past limits.max_holds the wake is started and the waiting page served at
// once (r answered, false); else release ends the hold.
func (g *Gateway) holdSlot(w http.ResponseWriter, r *http.Request, id string, route *proxy.Route) (release func(), ok bool) {
	release, ok = g.gate.limits.Hold()
	if ok {
		return release, true
	}
	if err := g.engine.Start(id); err != nil {
		g.writeError(w, r, err)
		return nil, false
	}
	g.serveWaitingPage(w, r, route)
	return nil, false
}

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
