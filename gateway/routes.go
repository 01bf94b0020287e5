package gateway

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/proxy/minrate"
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
		proxy.WriteClassified(w, r, fault.Response{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
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
			// The fleet's store does not answer, or another run took this
			// gateway's instance name over: warm homes still serve here,
			// but the edge should send new traffic elsewhere, as with a
			// store that takes no writes.
			w.WriteHeader(http.StatusServiceUnavailable)
			if g.nameLost() {
				_, _ = w.Write([]byte("degraded: instance name taken over by another run\n"))
				return
			}
			_, _ = w.Write([]byte("degraded: store unreachable\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	g.path.Mount(r) // GET /, /_wakegate/..., /apps/..., /node/...: route/serve.go
	return r
}

// hygiene runs before routing: it sets the request id, refuses what the
// edge refuses (ambiguous framing, paths that do not canonicalise: edge's
// Shape), tracks the request for the drain and writes the access log.
func (g *Gateway) hygiene(next http.Handler) http.Handler {
	access := g.cfg.Log.Access
	minResponseRate := g.cfg.Server.MinResponseRate > 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.inflight.Add(1)
		// rw.end releases the request: when this handler returns, or
		// when its WebSocket relay ends (Detach).
		rw := route.NewRecorder(w, &g.releases)
		defer rw.End()
		if minResponseRate {
			// The last response on this connection may have left a write
			// deadline for its buffered tail (proxy/minrate).
			minrate.LiftWriteDeadline(w)
		}
		// The probe header goes first, from every request; only the
		// gateway's own self-probe keeps its mark (route/apps.go).
		r, probe := g.routeTab.probe.hygiene(r)
		// The request id comes before any answer, refusals included.
		trusted := edge.TrustedProxies(g.cfg.Server.TrustedNets()).Peer(r)
		if !edge.KeepsRequestID(r, trusted) {
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
		if ok, err := edge.Shape(w, r); !ok { // framing and canonical path (DESIGN rules 24, 21)
			if err != nil {
				g.writeError(w, r, err)
			}
			return
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
	attrs := []any{"method", r.Method, "path", edge.LogPath(r.URL.Path, r.URL.RawPath), "status", status,
		"bytes", rw.Bytes(), "ms", float64(time.Since(start).Microseconds()) / 1000,
		"remote", r.RemoteAddr, "request_id", r.Header.Get("X-Request-Id")}
	if l := rw.Limit(); l != "" {
		attrs = append(attrs, "limit", l)
	}
	g.log.Log(r.Context(), level, "access", attrs...)
}
