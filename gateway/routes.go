package gateway

import (
	"context"
	"errors"
	"github.com/wakegate/wakegate/route"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
)

// writeError answers r with err through the request path's one mapper.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	g.path.WriteError(w, r, err)
}

// routes builds the public handler: hygiene first (framing, path
// canonicalisation, request id), then host routes, the app and home path
// routes (route/fastroute.go), and the router for everything else.
func (g *Gateway) routes() http.Handler {
	return g.hygiene(g.path.Handler(g.router())) // host and path routes: route/
}

// router is the public listener's router: every route, the app and home
// routes included (pathRoutes serves those before it, the same way).
func (g *Gateway) router() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, fault.New(fault.NotFound, "not_found", "There is no route for this path."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		// No kind of its own: the router's one status, with a fixed sentence.
		proxy.WriteClassified(w, r, proxy.Classified{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: "This method is not allowed on this path."})
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if g.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		if g.storeUnwritable() != "" {
			// The gateway cannot record wakes or admin changes: the edge
			// should send new traffic elsewhere. Warm homes still serve.
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: store unwritable\n"))
			return
		}
		if g.degraded() != "" {
			// Still ready: warm homes serve; wakes answer 503 meanwhile.
			_, _ = w.Write([]byte("degraded\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	g.path.Mount(r) // GET /, /_wakegate/..., /apps/..., /node/...: route/serve.go
	return r
}

// hygiene runs before routing: it refuses ambiguous framing and paths that
// do not canonicalise, sets the request id, tracks the request for the drain
// and writes the access log.
func (g *Gateway) hygiene(next http.Handler) http.Handler {
	access := *g.cfg.Log.Access
	minResponseRate := *g.cfg.Server.MinResponseRate > 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.inflight.Add(1)
		// rw.end releases the request: when this handler returns, or
		// when its WebSocket relay ends (Detach).
		rw := &recorder{ResponseWriter: w, end: reqEnd{g: g}}
		defer rw.end.run()
		if minResponseRate {
			// The last response on this connection may have left a write
			// deadline for its buffered tail (proxy/rate.go).
			proxy.LiftWriteDeadline(w)
		}
		// The probe header goes first, from every request; only the
		// gateway's own self-probe keeps its mark (route/apps.go).
		r, probe := g.routeTab.probe.hygiene(r)
		// The request id comes before any answer, refusals included.
		trusted := g.trustedPeer(r)
		if id := r.Header.Get("X-Request-Id"); id == "" || !trusted || len(id) > 128 {
			g.setRequestID(r, rw)
		}
		if trusted {
			// A trusted proxy's request counts for the client it forwards
			// for, under the same cap as a client's own connections.
			ip, ok := g.connLimit.TakeForwarded(r)
			if !ok {
				g.metrics.ConnsRefused().Inc()
				g.writeError(w, r, fault.New(fault.Limited, "too_many_connections",
					"This client has too many connections open."))
				return
			}
			rw.end.client = ip
		}
		if err := edge.FramingProblem(r.Context()); err != nil {
			w.Header().Set("Connection", "close")
			msg := "A request may not carry both Content-Length and Transfer-Encoding."
			if !edge.IsConflict(err) {
				msg = "The framing of a request on this connection could not be followed."
			}
			g.writeError(w, r, fault.New(fault.Invalid, "bad_framing", msg))
			return
		}
		if r.RequestURI != "*" {
			sent := r.URL.EscapedPath()
			p, raw, err := proxy.CanonicalPath(sent)
			if err != nil {
				g.writeError(w, r, badPath(err))
				return
			}
			if raw != sent { // never a silent reroute (DESIGN rule 21)
				redirectCanonical(w, r, raw)
				return
			}
			r.URL.Path, r.URL.RawPath = p, raw
		}
		if !g.path.ClientAllowed(w, r) { // route/access.go
			return
		}
		var start time.Time
		if access {
			start = time.Now()
		}
		next.ServeHTTP(rw, r)
		g.metrics.Observe(r.URL.Path, rw.status, rw.fwd, rw.headerAt)
		if !access || probe {
			return
		}
		status := rw.status
		if status == 0 {
			status = http.StatusSwitchingProtocols // hijacked
		}
		level := accessLevel(r, status)
		if !g.log.Enabled(r.Context(), level) {
			return // no record to build
		}
		g.log.Log(r.Context(), level, "access", "method", r.Method, "path", r.URL.Path, "status", status,
			"bytes", rw.bytes, "ms", float64(time.Since(start).Microseconds())/1000,
			"remote", r.RemoteAddr, "request_id", r.Header.Get("X-Request-Id"))
	})
}

// trustedPeer reports whether r's peer is a trusted proxy.
func (g *Gateway) trustedPeer(r *http.Request) bool {
	if len(g.cfg.Server.TrustedNets()) == 0 {
		return false // no address to parse on every request
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || ap.Addr().Zone() != "" {
		return false // not an IP peer; a zoned one is not trusted either
	}
	return trustedProxies(g.cfg.Server.TrustedNets()).hasAddr(ap.Addr())
}

// redirectCanonical answers a request whose path is not canonical with a
// 308 to its canonical form raw (an absolute path: the canonical form has
// no "//" at its start, so the Location never names another host), so a
// cache in front and the gateway agree on which route a URL names.
func redirectCanonical(w http.ResponseWriter, r *http.Request, raw string) {
	loc := raw
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusPermanentRedirect)
}

// badPath answers a request whose path CanonicalPath refused, naming the
// rule it broke (a fixed phrase) but not the path.
func badPath(err error) error {
	msg := "The request path is not canonical."
	var pe *proxy.PathError
	if errors.As(err, &pe) {
		msg = "The request path is refused: " + pe.Reason + "."
	}
	return fault.Wrap(fault.Invalid, "bad_path", msg, err)
}

// recorder captures the status and size of a response for the access log
// and the metrics. Unwrap lets http.ResponseController reach Flush and
// Hijack.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// fwd is when the request was forwarded (after any wake wait), and
	// headerAt when its response headers were written.
	fwd, headerAt time.Time
	// end is what the request releases when it is over.
	end reqEnd
	// route is the request's route (newRoute), and reqID the value of its
	// X-Request-Id header when the gateway set it (setRequestID): one
	// allocation for the three.
	route proxy.Route
	reqID [1]string
}

// reqEnd is what a request releases when it is over: the functions added
// to it, last added first, then its forwarded client's place under the
// connection cap, and its place in the in-flight count last.
type reqEnd struct {
	g   *Gateway // nil once released
	fns []func()
	// client is whom a trusted proxy forwarded the request for, counted
	// by ConnLimit.TakeForwarded until the request is over (invalid when
	// not counted).
	client netip.Addr
}

// add has f run when the request is over.
func (e *reqEnd) add(f func()) { e.fns = append(e.fns, f) }

// run releases the request; it does nothing when run again.
func (e *reqEnd) run() {
	for i := len(e.fns) - 1; i >= 0; i-- {
		e.fns[i]()
	}
	e.fns = nil
	if e.g != nil {
		e.g.connLimit.Release(e.client)
		e.g.inflight.Done()
		e.g = nil
	}
}

// Detach hands the end of the request to the WebSocket relay the proxy
// is about to start (proxy.Detacher): the handler returns at once, and
// the request (its session, its place in the drain's count) ends when the
// relay does, or when the hard stop cuts it.
func (r *recorder) Detach() (context.Context, func()) {
	e := new(reqEnd)
	*e, r.end = r.end, reqEnd{}
	if e.g == nil {
		return context.Background(), e.run // released already
	}
	return e.g.hardStop, e.run
}

// Route is the request's one route (route.Exchange).
func (r *recorder) Route() *proxy.Route { return &r.route }

// AtEnd has f run when the request is over (route.Exchange).
func (r *recorder) AtEnd(f func()) { r.end.add(f) }

// Forwarding notes that the request is being forwarded now
// (route.Exchange).
func (r *recorder) Forwarding() { r.fwd = time.Now() }

// Answer is the request's status and when it was forwarded and answered
// (route.Exchange).
func (r *recorder) Answer() (status int, fwd, headerAt time.Time) { return r.status, r.fwd, r.headerAt }

var _ route.Exchange = (*recorder)(nil)

var _ proxy.Detacher = (*recorder)(nil)

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
		r.headerAt = time.Now()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.headerAt = time.Now()
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
