package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/proxy/h1client"
	"github.com/wakegate/wakegate/proxy/minrate"
)

// forwarding is one request's forward as Serve owns it: the route the
// request path handed over (forward.Route), and what the data plane keeps
// beside it while the request lasts.
type forwarding struct {
	*forward.Route

	// rel is the relay of a WebSocket upgrade (relay.go); nil otherwise.
	rel *relay
	// bodyCut is set when the request body was cut for arriving slower
	// than the minimum rate (proxy/minrate).
	bodyCut atomic.Bool
	// body is the request body as Serve owns it (h1client/body.go), with the
	// failure to read it (clientbody.go); nil without one.
	body *h1client.OwnedBody
	// out is the outbound header plan (headers.go), made once in Serve
	// for whichever path forwards the request.
	out outHead
}

// Options configure a Proxy.
type Options struct {
	// RelayHeader carries a home's relay token. Required.
	RelayHeader string
	// StripHeaders are removed from every inbound request before forwarding
	// (the internal probe header, the caller's gateway credentials).
	StripHeaders []string
	// Trusted reports whether the socket peer's address is a trusted
	// proxy's, whose forwarding headers are kept: the edge's one rule
	// (edge.TrustedProxies.Has). nil trusts nobody.
	Trusted func(ip net.IP) bool
	// ClientIP resolves the real client address (through trusted
	// proxies), sent as X-Real-Ip. nil: the socket peer.
	ClientIP func(r *http.Request) string
	// MaxBodyBytes caps request bodies (413 past it); zero means no cap.
	MaxBodyBytes int64
	// AllowOrigin reports whether a WebSocket upgrade's Origin may connect;
	// nil allows only the request's own host.
	AllowOrigin func(origin string, r *http.Request) bool
	// DialTimeout bounds connecting to an upstream.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds waiting for response headers.
	ResponseHeaderTimeout time.Duration
	// HomeResponseHeaderTimeout bounds waiting for the response headers of
	// a home (a route with a HomeID) instead; zero means
	// ResponseHeaderTimeout. Past it the forward fails (504) and is
	// reported to the route (OnFailure), which drops the home's verdict.
	HomeResponseHeaderTimeout time.Duration
	// MinBodyRate is the least rate, in bytes per second, at which a
	// request body must arrive once MinRateGrace has passed (proxy/minrate); a
	// slower body is cut and answered 408 body_too_slow. Zero: no floor.
	MinBodyRate int64
	// MinResponseRate is the least rate, in bytes per second, at which a
	// client must take each response write after MinRateGrace; a slower
	// reader's connection is closed. WebSockets are exempt. Zero: no floor.
	MinResponseRate int64
	// MinRateGrace is the time allowed before the rates apply.
	MinRateGrace time.Duration
	// MinRateWindow is how much time a request body's earlier bytes may
	// bank for a later stall (proxy/minrate): past the grace, a body that
	// stops is cut within MinRateGrace plus this, whatever arrived
	// before. Zero means minrate.DefaultWindow.
	MinRateWindow time.Duration
	// BodyBuffer is how much of a request body, in bytes, is read into
	// memory before a route's Acquire takes a forwarding slot (spool.go).
	// Zero: bodies are not read ahead; they arrive while the slot is held.
	BodyBuffer int64
	// BodySpool is how much more of a request body, in bytes, is read
	// ahead into a temporary file past BodyBuffer. Zero: nothing goes to
	// disk, and a body longer than BodyBuffer arrives while the slot is
	// held.
	BodySpool int64
	// SpoolDir is where those temporary files are made; "" is the
	// system's temporary directory.
	SpoolDir string
	// BodyBudgetClient and BodyBudgetTotal bound what the read-ahead
	// (BodyBuffer and BodySpool) holds at once for one client address
	// and for all (budget.go); zero: no bound.
	BodyBudgetClient, BodyBudgetTotal int64
	// MaxIdleConnsPerHost is the keep-alive pool per upstream.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes idle pooled connections.
	IdleConnTimeout time.Duration
	// Log receives proxy errors.
	Log *slog.Logger
	// Host says which Host each route's requests carry (headers.go);
	// the zero value gives every route the client's Host (an https
	// upstream its own).
	Host HostPolicy
	// Protected reports whether the canonical header name n is one that
	// an access policy sets on forwarded requests (forward_auth's
	// response_headers): its spellings with underscores are removed from
	// every request, as the gateway's own are. The access gate removes
	// the name itself before it sets the policy's values. nil: none.
	Protected func(n string) bool
}

// Proxy forwards requests to routes.
type Proxy struct {
	opts      Options
	rp        *httputil.ReverseProxy
	transport *http.Transport
	// homes is transport with the homes' response header timeout, for
	// routes with a HomeID.
	homes *http.Transport
	// conns is the pool of the upstream forwarder (h1client/forwarder.go), which
	// carries plain HTTP/1.1 requests; the transports carry the rest.
	conns    *h1client.Pool
	stripped []string // canonical names
	// blocks are the direct path's head blocks (HeadBlock); blocked
	// counts the heads written as blocks.
	blocks  sync.Pool
	blocked atomic.Int64

	relayMu sync.Mutex
	relays  map[*relay]struct{} // WebSockets being relayed (relay.go)
	// stops are the watches on the relays' stop channels.
	stops map[<-chan struct{}]*stopWatch
	// parker holds the pumps of idle relays (relay_park_linux.go).
	parker    parker
	goingAway bool // GoingAway was called
	// bufs are the pooled buffers of bodies and relays (mask.go);
	// relayBufs counts those the relays hold now.
	bufs      *bufferPool
	relayBufs atomic.Int64

	// apps and homes carry plain HTTP/1.1 requests, for routes without
	// and with a HomeID (their response header timeouts differ).
	fwdApps, fwdHomes *h1client.Forwarder
	// upApps and upHomes carry WebSocket upgrades, through transports
	// whose buffers fit a handshake (upgradeTransport, relay_pump.go).
	upApps, upHomes *h1client.Forwarder
	upgrades        [2]*http.Transport
	// noDirect sends every request through ReverseProxy (direct.go); set
	// only by tests, which compare the two paths.
	noDirect bool
	// noBlock has the direct path put every response's fields in the
	// client writer's header map (direct.go's head blocks); set by
	// benchmarks that compare the two.
	noBlock bool
	// spliced counts the bodies sent by the direct path through the
	// writers' ReadFrom (direct_splice.go), for tests.
	spliced atomic.Int64
	// budget is the body budget (budget.go); nil for none.
	budget *bodyBudget
}

type routeKey struct{}

// New returns a Proxy.
func New(o Options) *Proxy {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// A home on a Unix socket is reached through its stand-in
			// host (internal/endpoint); any other address as it is.
			c, err := endpoint.Dial(ctx, dialer, network, addr)
			if err != nil {
				return nil, &DialError{Err: err}
			}
			return c, nil
		},
		MaxIdleConns:          0, // no global cap: MaxIdleConnsPerHost bounds each upstream
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       o.IdleConnTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
	homes := tr.Clone()
	if o.HomeResponseHeaderTimeout > 0 {
		homes.ResponseHeaderTimeout = o.HomeResponseHeaderTimeout
	}
	conns := h1client.NewPool(tr.DialContext, o.MaxIdleConnsPerHost, o.IdleConnTimeout)
	p := &Proxy{opts: o, transport: tr, homes: homes, conns: conns, relays: map[*relay]struct{}{}, stops: map[<-chan struct{}]*stopWatch{}, bufs: newBufferPool()}
	p.budget = newBodyBudget(o.BodyBudgetClient, o.BodyBudgetTotal)
	p.stripped = []string{http.CanonicalHeaderKey(o.RelayHeader)}
	for _, h := range o.StripHeaders {
		p.stripped = append(p.stripped, http.CanonicalHeaderKey(h))
	}
	p.fwdApps = h1client.NewForwarder(conns, tr.ResponseHeaderTimeout, tr, bodyOf)
	p.fwdHomes = h1client.NewForwarder(conns, homes.ResponseHeaderTimeout, homes, bodyOf)
	p.upgrades = [2]*http.Transport{upgradeTransport(tr), upgradeTransport(homes)}
	p.upApps = h1client.NewForwarder(conns, tr.ResponseHeaderTimeout, p.upgrades[0], bodyOf)
	p.upHomes = h1client.NewForwarder(conns, homes.ResponseHeaderTimeout, p.upgrades[1], bodyOf)
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      retryTransport{apps: p.fwdApps, homes: p.fwdHomes, upApps: p.upApps, upHomes: p.upHomes, p: p},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
		BufferPool:     p.bufs,
	}
	return p
}

// Close closes idle upstream connections and stops the waiter of idle
// WebSockets: those still open wait on a goroutine each from then on.
func (p *Proxy) Close() {
	p.parker.stop()
	p.transport.CloseIdleConnections()
	p.homes.CloseIdleConnections()
	for _, tr := range p.upgrades {
		tr.CloseIdleConnections()
	}
	p.conns.CloseIdle()
}

// DropIdle closes the idle pooled connections to the upstream at base (a
// home's endpoint), as when the home has stopped, and returns how many it
// closed. Connections in use end with their exchange.
func (p *Proxy) DropIdle(base *url.URL) int {
	if base == nil || base.Scheme != "http" {
		return 0
	}
	return p.conns.DropIdle(h1client.HostPort(base))
}

// Serve forwards r to route. It returns when the exchange is over: for a
// WebSocket, when its hijacked connection has closed on either side. The
// caller counts the session around it (see Sessions), from before the route
// was resolved, so that no suspend can slip in between.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, to *forward.Route) {
	route := &forwarding{Route: to}
	if isUpgrade(r) {
		if origin := r.Header.Get("Origin"); origin != "" && !p.allowOrigin(origin, r) {
			WriteError(w, r, fault.New(fault.Forbidden, "origin_not_allowed",
				"WebSocket connections from this origin are not allowed."))
			return
		}
	}
	if max := p.opts.MaxBodyBytes; max > 0 {
		if r.ContentLength > max {
			p.opts.Log.Info("request body refused: over the limit", "route", route.Name, "path", r.URL.Path,
				"content_length", r.ContentLength, "request_id", r.Header.Get("X-Request-Id"), "hint", hintTooLarge)
			WriteError(w, r, &http.MaxBytesError{Limit: max})
			return
		}
	}
	if h1client.HasBody(r) {
		// Every read of the body goes through route.body, which ends, at
		// the latest, when Serve returns (h1client/body.go).
		route.body = h1client.NewOwnedBody(r.Body, w)
		r.Body = route.body
		defer route.body.End()
		if max := p.opts.MaxBodyBytes; max > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
	}
	if rate := p.opts.MinBodyRate; rate > 0 && r.Body != nil && r.Body != http.NoBody {
		r.Body = minrate.NewBody(r.Body, w, rate, p.opts.MinRateGrace, p.opts.MinRateWindow, &route.bodyCut, route.body)
	}
	if route.body != nil {
		r.Body = &clientBody{ReadCloser: r.Body, err: &route.body.Failed} // clientbody.go
	}
	if route.Acquire != nil {
		if !isUpgrade(r) {
			sp, err := p.spool(r) // spool.go
			if br := (*budgetRefused)(nil); errors.As(err, &br) {
				p.bodyRefused(w, r, route, br.fe) // budget.go
				return
			}
			if err != nil {
				p.answerError(w, r, route, r.URL.Path, err)
				return
			}
			if sp != nil {
				defer func() { _ = sp.Close() }() // the temporary file, and the caller's body
				if sp.disk != nil {
					p.opts.Log.Warn("request body forwarded as it arrives: no temporary file", "route", route.Name,
						"request_id", r.Header.Get("X-Request-Id"), "err", sp.disk,
						"hint", "make proxy.body_spool_dir (else the system's temporary directory) writable")
				}
			}
		}
		release, ok := route.Acquire(w, r)
		if !ok {
			return
		}
		defer release()
	}
	if rate := p.opts.MinResponseRate; rate > 0 && !isUpgrade(r) && !minrate.SetWriteFloor(w, rate, p.opts.MinRateGrace) {
		w = minrate.NewWriter(w, rate, p.opts.MinRateGrace) // proxy/minrate
	}
	if isWebSocket(r) {
		// The relay takes the upgrade over at the 101 (relay_pump.go).
		route.rel = &relay{relayState: relayState{p: p, w: w}}
	}
	if route.RelayToken != "" {
		w = &infoMaskWriter{ResponseWriter: w, secret: route.RelayToken} // leak.go
	}
	p.plan(r, route) // headers.go
	if p.direct(r, route) {
		p.serveDirect(w, r, route) // direct.go
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), routeKey{}, route))
	p.rp.ServeHTTP(w, r)
	if rel := route.rel; rel != nil && rel.handedOff && rel.done != nil {
		<-rel.done // no Detacher: the request lasts as long as its relay
	}
}

func (p *Proxy) allowOrigin(origin string, r *http.Request) bool {
	if p.opts.AllowOrigin != nil {
		return p.opts.AllowOrigin(origin, r)
	}
	return SameHostOrigin(origin, r)
}

// SameHostOrigin reports whether origin's host (with port) equals the
// request's Host.
func SameHostOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && h1client.HeaderHasToken(r.Header, "Connection", "upgrade")
}

// bodyOf is the request body, as Serve owns it, of the route in ctx (nil
// for none): the forwarder's, for ReverseProxy's outbound requests.
func bodyOf(ctx context.Context) *h1client.OwnedBody {
	if route := routeFrom(ctx); route != nil {
		return route.body
	}
	return nil
}

func routeFrom(ctx context.Context) *forwarding {
	r, _ := ctx.Value(routeKey{}).(*forwarding)
	return r
}

// rewrite builds the outbound request: its URL, and its fields by the
// request's outbound plan (headers.go). Hop-by-hop headers (including any
// named in Connection) were already removed by ReverseProxy, so nothing set
// here can be removed by the caller.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	route := routeFrom(pr.In.Context())
	out := pr.Out
	target := route.Upstream
	out.URL.Scheme = target.Scheme
	out.URL.Host = target.Host
	out.URL.Path, out.URL.RawPath = route.upstreamPath(pr.In.URL)
	out.Host = route.out.host
	p.apply(&route.out, out.Header) // headers.go
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // do not add Go's default
	}
}

// upstreamPath is the path and raw path of in toward route's upstream:
// StripPrefix removed, the upstream's base path put in front.
func (route *forwarding) upstreamPath(in *url.URL) (path, raw string) {
	target := route.Upstream
	path, raw = in.Path, in.RawPath
	if route.StripPrefix != "" {
		path = strings.TrimPrefix(path, route.StripPrefix)
		raw = strings.TrimPrefix(raw, route.StripPrefix)
		if path == "" || path[0] != '/' {
			path = "/" + path
			if raw != "" {
				raw = "/" + raw
			}
		}
	}
	if target.Path != "" && target.Path != "/" {
		base := strings.TrimSuffix(target.Path, "/")
		path = base + path
		if raw != "" {
			raw = strings.TrimSuffix(target.EscapedPath(), "/") + raw
		}
	}
	return path, raw
}

// clientIP is r's client address for X-Real-Ip.
func (p *Proxy) clientIP(r *http.Request) string {
	if p.opts.ClientIP != nil {
		return p.opts.ClientIP(r)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

func (p *Proxy) modifyResponse(res *http.Response) error {
	route := routeFrom(res.Request.Context())
	p.adjustResponse(res, route)
	if rel := route.rel; rel != nil && res.StatusCode == http.StatusSwitchingProtocols {
		return p.handOff(res, rel) // relay_pump.go
	}
	return nil
}

// adjustResponse removes the stripped headers from res, masks the relay
// token in its headers, body and trailers, and reports the wake's wait.
func (p *Proxy) adjustResponse(res *http.Response, route *forwarding) {
	for _, h := range p.stripped {
		delete(res.Header, h) // canonical already
	}
	if tok := route.RelayToken; tok != "" {
		maskHeaders(res.Header, tok)
		if res.Body != nil && res.Body != http.NoBody && res.StatusCode != http.StatusSwitchingProtocols {
			res.Body = &trailerMask{ReadCloser: newMaskReader(res.Body, tok), res: res, secret: tok} // leak.go
		}
	}
	if route.Waited > 0 {
		res.Header.Add("Server-Timing", "wake;dur="+strconv.FormatInt(route.Waited.Milliseconds(), 10))
	}
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if err == errRelayOver {
		return // the relay has the connections (relay_pump.go)
	}
	p.answerError(w, r, routeFrom(r.Context()), r.URL.Path, err)
}

// answerError answers the request r of route (nil for none), whose
// forward to path failed with err, and logs why.
func (p *Proxy) answerError(w http.ResponseWriter, r *http.Request, route *forwarding, path string, err error) {
	if route != nil && route.bodyCut.Load() {
		// The client, not the upstream, failed: no verdict is dropped. The
		// server ended the request's context with the read that timed out.
		p.opts.Log.Info("request body cut: slower than the minimum rate", "route", route.Name,
			"path", path, "request_id", r.Header.Get("X-Request-Id"))
		w.Header().Set("Connection", "close")
		WriteClassified(w, r, bodyTooSlow)
		return
	}
	if berr := route.clientBodyFailed(); berr != nil && r.Context().Err() == nil {
		c := badBody(berr)
		attrs := []any{"route", route.Name, "path", path, "request_id", r.Header.Get("X-Request-Id"), "err", berr}
		if c.Hint != "" {
			attrs = append(attrs, "hint", c.Hint)
		}
		p.opts.Log.Info("request body unreadable", attrs...)
		w.Header().Set("Connection", "close")
		WriteClassified(w, r, c)
		return
	}
	if r.Context().Err() != nil {
		if fe, ok := fault.As(context.Cause(r.Context())); ok {
			// The server ended the request (a shutdown past its grace):
			// its reason is the answer, if nothing was answered yet.
			w.Header().Set("Connection", "close")
			WriteError(w, r, fe)
			return
		}
		if errors.Is(err, context.Canceled) {
			// The caller went away; nobody is left to answer.
			w.WriteHeader(499)
			return
		}
	}
	c := StatusOf(err)
	name := ""
	if route != nil {
		name = route.Name
	}
	// The cause is for the log only; the caller gets the code, the
	// sentence and this request id.
	attrs := []any{"route", name, "path", path, "status", c.Status, "code", c.Code,
		"request_id", r.Header.Get("X-Request-Id"), "err", err}
	if c.Hint != "" {
		attrs = append(attrs, "hint", c.Hint)
	}
	p.opts.Log.Warn("proxy error", attrs...)
	WriteClassified(w, r, c)
}

// retryTransport is ReverseProxy's transport: a failed forward goes to
// the one retry decision (retry.go), and a clone of the request, with the
// fresh upstream and its Host, is sent once more when it says so.
// Homes go through their own transport, whose response header timeout
// is the homes' one; WebSocket upgrades through the upgrade transports.
type retryTransport struct {
	apps, homes     http.RoundTripper
	upApps, upHomes http.RoundTripper
	p               *Proxy
}

func (t retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	route := routeFrom(req.Context())
	base := t.apps
	switch {
	case route == nil:
	case route.rel != nil && route.HomeID != "":
		base = t.upHomes
	case route.rel != nil:
		base = t.upApps
	case route.HomeID != "":
		base = t.homes
	}
	if route != nil && route.rel != nil {
		req = traceUpgrade(req, route.rel) // the relay waits on the connection's descriptor
	}
	res, err := base.RoundTrip(req)
	if err == nil {
		return res, nil
	}
	if route == nil {
		return nil, err
	}
	u, err := t.p.retryUpstream(route, req, err) // retry.go
	if u == nil {
		return nil, err
	}
	again := req.Clone(req.Context())
	again.URL.Scheme, again.URL.Host = u.Scheme, u.Host
	again.Host = route.out.host
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	res, err = base.RoundTrip(again)
	if err != nil {
		route.failed(again)
	}
	return res, err
}

// maskHeaders replaces the secret wherever it appears in header values.
func maskHeaders(h http.Header, secret string) {
	for k, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, secret) {
				h[k][i] = strings.ReplaceAll(v, secret, strings.Repeat("*", len(secret)))
			}
		}
	}
}

var _ io.ReadCloser = (*maskReader)(nil)
