package gateway

import (
	"errors"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/h1serve"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/route"
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
			// The fleet's store does not answer: warm homes still serve
			// here, but the edge should send new traffic elsewhere, as
			// with a store that takes no writes.
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("degraded: store unreachable\n"))
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
		rw := route.NewRecorder(w, &g.releases)
		defer rw.End()
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
			rw.SetRequestID(r, g.reqPre, g.reqSeq.Add(1))
		}
		if trusted {
			// A trusted proxy's request counts for the client it forwards
			// for, under the same cap as a client's own connections.
			ip, ok := g.connLimit.TakeForwarded(r)
			if !ok {
				g.metrics.ConnsRefused().Inc()
				rw.MarkLimit("conns")
				g.log.Info("request limited", "scope", "conns", "path", r.URL.Path,
					"request_id", r.Header.Get("X-Request-Id"),
					"hint", "the client a trusted proxy forwards for has server.max_conns_per_client requests open: raise it")
				g.writeError(rw, r, fault.New(fault.Limited, "too_many_connections",
					"This client has too many connections open."))
				if access && !probe {
					g.accessLog(r, rw, time.Now())
				}
				return
			}
			rw.SetClient(ip)
		}
		// The framing watch is on net/http's connections only (the
		// loop's parser refuses what it would find), and a miss walks
		// the whole context: the loop's requests skip it.
		if err := framingProblem(w, r); err != nil {
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
			p, raw, err := edge.CanonicalPath(sent)
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
		var start time.Time
		if access {
			start = time.Now()
		}
		if g.path.ClientAllowed(rw, r) { // route/access.go
			next.ServeHTTP(rw, r)
		}
		status, fwd, headerAt := rw.Answer()
		g.metrics.Observe(r.URL.Path, status, fwd, headerAt)
		if access && !probe {
			g.accessLog(r, rw, start)
		}
	})
}

// accessLog writes the access log line of r, answered through rw since
// start; a request a limit refused names that limit.
func (g *Gateway) accessLog(r *http.Request, rw *route.Recorder, start time.Time) {
	status, _, _ := rw.Answer()
	if status == 0 {
		status = http.StatusSwitchingProtocols // hijacked
	}
	level := accessLevel(r, status)
	if !g.log.Enabled(r.Context(), level) {
		return // no record to build
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status,
		"bytes", rw.Bytes(), "ms", float64(time.Since(start).Microseconds()) / 1000,
		"remote", r.RemoteAddr, "request_id", r.Header.Get("X-Request-Id")}
	if l := rw.Limit(); l != "" {
		attrs = append(attrs, "limit", l)
	}
	g.log.Log(r.Context(), level, "access", attrs...)
}

// framingProblem is what the framing watch found wrong on r's
// connection, for a request net/http serves; nil for the loop's.
func framingProblem(w http.ResponseWriter, r *http.Request) error {
	if h1serve.Serves(w) {
		return nil
	}
	return edge.FramingProblem(r.Context())
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
	var pe *edge.PathError
	if errors.As(err, &pe) {
		msg = "The request path is refused: " + pe.Reason + "."
	}
	return fault.Wrap(fault.Invalid, "bad_path", msg, err)
}
