package route

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/proxy"
)

// Gate runs the access policies and the abuse limits (package access)
// before anything wakes a home or reaches one (DESIGN rule 25).
type Gate struct {
	// set is replaced whole by a reload that changes access.
	set    atomic.Pointer[access.Set]
	limits *access.Limits
	ip     access.ClientIP
	// clientRate is whether limits.client_rate is on (a restart-only
	// setting): off, a request's client address is not resolved for it.
	clientRate bool
	denied     *prometheus.CounterVec // policy, code
	recent     Denials
	counters   Counters
}

// Denials keeps the recent refusals for the admin API.
type Denials interface {
	Add(d admin.Denial)
}

// Counters are the counts of requests refused by a limit, by scope
// (telemetry.Metrics).
type Counters interface {
	RateLimited(scope string) prometheus.Counter
}

// NewGate returns the gate of policies set and limits, naming clients
// through ip; clientRate is whether limits.client_rate is on. Refusals by
// a policy are kept in recent and counted in Denied; refusals by a limit
// are counted in counters.
func NewGate(set *access.Set, limits *access.Limits, ip access.ClientIP, clientRate bool, recent Denials,
	counters Counters) *Gate {
	gt := &Gate{limits: limits, ip: ip, clientRate: clientRate, recent: recent, counters: counters,
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_access_denied_total",
			Help: "Requests refused by an access policy, by policy name and public code.",
		}, []string{"policy", "code"}),
	}
	gt.set.Store(set)
	return gt
}

// Denied is the count of refusals by a policy, to register.
func (gt *Gate) Denied() *prometheus.CounterVec { return gt.denied }

// Set is the policies now.
func (gt *Gate) Set() *access.Set { return gt.set.Load() }

// SwapSet puts set in place of the policies and returns the old ones,
// for the caller to close.
func (gt *Gate) SwapSet(set *access.Set) *access.Set { return gt.set.Swap(set) }

// Limits are the gate's limiter tables.
func (gt *Gate) Limits() *access.Limits { return gt.limits }

// IP is the gate's client-address resolver.
func (gt *Gate) IP() access.ClientIP { return gt.ip }

// Close stops the policies' background work; a nil Gate does nothing.
func (gt *Gate) Close() {
	if gt != nil {
		gt.set.Load().Close()
	}
}

// AdmitWake takes one wake of home id from its wake rate (limits.wake_rate):
// 0 lets the wake start, else how long until one would be allowed. The
// engine asks it only for a wake a request starts, so callers that join
// a wake in flight are never refused by it. A nil Gate admits every wake.
func (gt *Gate) AdmitWake(id string) time.Duration {
	if gt == nil {
		return 0
	}
	d := gt.limits.Wake(id)
	if d > 0 {
		gt.counters.RateLimited("wake").Inc()
	}
	return d
}

// clientAllowed takes a request from its client's rate budget
// (limits.client_rate), for every path but the health checks and a home's
// ready signal (which its relay token authenticates); false means r was
// answered 429.
func (p *Path) clientAllowed(w http.ResponseWriter, r *http.Request) bool {
	if !p.gate.clientRate {
		return true
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/_wakegate/ready":
		return true
	}
	if d := p.gate.limits.Client(p.gate.ip.Of(r)); d > 0 {
		p.limited(w, r, "client", fault.New(fault.Limited, "rate_limited", "Too many requests; slow down.").WithRetry(d))
		return false
	}
	return true
}

// admit runs the access policy of a request for
// the home at target (kind "node") or the app slug (kind "app"), whose home
// is h (nil for an app outside any home). It returns false when r was
// answered (denied); else r may go on, its token query
// parameter removed and the policy's headers set.
func (p *Path) admit(w http.ResponseWriter, r *http.Request, kind, name string, h *Home) bool {
	gt := p.gate
	set := gt.set.Load()
	var c access.Chosen
	s := access.Subject{Kind: kind, Name: name}
	if h != nil {
		s.Target = h.spec.Target
		s.Owner = set.Owner(s.Target)
	}
	if kind == "node" {
		c = set.ForHome(name)
	} else {
		c = set.ForApp(name)
	}
	// No client sets a header a policy sets (X-User), on any route
	// (DESIGN rule 22): the proxy removes their underscore spellings.
	for _, k := range set.IdentityHeaders() {
		delete(r.Header, k)
	}
	// A page opened with a token in its query names it in every Referer.
	set.StripReferer(r)
	// The gateway's cookies go to no home, whatever policy decides the
	// route (once it has read them): under path routing every home shares
	// the visitor's cookies for this origin, so a public home would
	// otherwise read a token meant for another one. So do a jwt policy's
	// bearer and query tokens, on routes it does not decide.
	if c.Name == access.PolicyPublic {
		access.StripCookies(r.Header, set.GatewayCookies(), "")
		set.StripForeign(r, c)
		return true
	}
	d, err := c.Policy.Check(r.Context(), r, s)
	if err != nil {
		p.deny(w, r, c.Name, s, err)
		return false
	}
	access.StripCookies(r.Header, set.GatewayCookies(), c.KeepCookie)
	set.StripForeign(r, c)
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
func (p *Path) deny(w http.ResponseWriter, r *http.Request, policy string, s access.Subject, err error) {
	var reply *access.Reply
	code := "auth_reply"
	status := 0
	if errors.As(err, &reply) {
		status = reply.Status
	} else {
		c := proxy.StatusOf(err)
		code, status = c.Code, c.Status
	}
	p.gate.denied.WithLabelValues(policy, code).Inc()
	d := admin.Denial{At: time.Now().UTC(), Policy: policy, Route: s.Kind + "/" + s.Name, Status: status, Code: code,
		Reason: access.Reason(err), Client: p.gate.ip.Of(r), RequestID: r.Header.Get("X-Request-Id")}
	p.gate.recent.Add(d)
	p.log.Info("access denied", "policy", policy, "route", d.Route, "status", status, "code", code,
		"reason", d.Reason, "client", d.Client, "request_id", d.RequestID)
	if reply != nil {
		reply.Write(w)
		return
	}
	proxy.WriteClassified(w, r, proxy.StatusOf(err))
}

// limited answers a request over a limit of scope and counts it; the
// access log names the limit, and the operator's log the setting that
// sets it.
func (p *Path) limited(w http.ResponseWriter, r *http.Request, scope string, err *fault.Error) {
	p.gate.counters.RateLimited(scope).Inc()
	proxy.MarkLimit(w, scope)
	p.log.Info("request limited", "scope", scope, "path", r.URL.Path, "client", p.gate.ip.Of(r),
		"retry_after", err.RetryAfter.Round(time.Millisecond), "request_id", r.Header.Get("X-Request-Id"),
		"hint", limitHints[scope])
	proxy.WriteClassified(w, r, proxy.StatusOf(err))
}

// limitHints say, per scope, which setting to raise when a limit refuses
// requests that are not abuse.
var limitHints = map[string]string{
	"client": "the client sent more requests than limits.client_rate and limits.client_burst allow: raise them, " +
		"or set client_rate to 0 and rely on limits.conn_rate, which a browser's keep-alive requests do not spend",
	"waiting": "more callers waited for this home's wake than limits.max_waiting_per_home allows: raise it",
}

// waitSlot counts a caller waiting for home id's wake; false (with r
// answered 503) past limits.max_waiting_per_home. done ends the wait.
func (p *Path) waitSlot(w http.ResponseWriter, r *http.Request, id string) (done func(), ok bool) {
	done, ok = p.gate.limits.Wait(id)
	if !ok {
		p.limited(w, r, "waiting", fault.New(fault.NotReady, "too_many_waiting",
			"Too many requests are waiting for this home; try again shortly.").WithRetry(p.conf().RetryAfter))
	}
	return done, ok
}

// holdSlot counts a browser held for wake.hold before the waiting page.
// Past limits.max_holds the wake is started and the waiting page served at
// once (r answered, false); else release ends the hold.
// since is when the navigation began to wait, for the page's clock.
func (p *Path) holdSlot(w http.ResponseWriter, r *http.Request, id string, route *forward.Route, since time.Time) (release func(), ok bool) {
	release, ok = p.gate.limits.Hold()
	if ok {
		return release, true
	}
	if err := p.engine.Start(id); err != nil {
		p.writeError(w, r, err)
		return nil, false
	}
	p.serveWaitingPage(w, r, route, since)
	return nil, false
}
