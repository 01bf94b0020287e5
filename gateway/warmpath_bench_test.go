package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/route"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/internal/testbin"
)

// benchGateway builds (without serving) a gateway with one app and one
// static home, for the step benchmarks.
func benchGateway(b *testing.B, extra string) *Gateway {
	b.Helper()
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
log:
  level: warn
homes:
  - id: demo
    provider: static
    endpoint: http://127.0.0.1:9/
    probe: tcp
apps:
  - slug: bench
    upstream: http://127.0.0.1:9/
    kind: api
%s`, filepath.Join(b.TempDir(), "data"), extra)
	cfg, err := all.Load("steps.yaml", []byte(text))
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(&testbin.LogBuffer{}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	b.Cleanup(g.Close)
	return g
}

// benchRequest is a warm GET for an app as the server hands it over: its
// context carries what net/http's and the gateway's connection contexts
// carry.
func benchRequest(path string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://gw.example"+path, nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("User-Agent", "wrk")
	ctx := context.WithValue(context.Background(), http.ServerContextKey, &http.Server{})
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, &net.TCPAddr{})
	ctx = edge.ConnContext(ctx, edge.Watch(nil))
	ctx, cancel := context.WithCancel(ctx)
	_ = cancel
	return r.WithContext(ctx)
}

// BenchmarkWarmSteps measures, one at a time, the steps the gateway's own
// handler takes for a warm request (hygiene, routing, access, metrics,
// the forward's bookkeeping), in their current form and, where it
// changed, the form they replaced ("old").
func BenchmarkWarmSteps(b *testing.B) {
	g := benchGateway(b, "")
	gRate := benchGateway(b, "limits:\n  client_rate: 1000000\n")
	gTrust := benchGateway(b, "server:\n  trusted_proxies: [10.0.0.0/8]\n")
	r := benchRequest("/apps/bench/small")
	w := httptest.NewRecorder()
	app, _ := g.appBySlug("bench")

	b.Run("recorder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.inflight.Add(1)
			rw := route.NewRecorder(w, &g.releases)
			rw.End()
		}
	})
	b.Run("request_id/old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Header.Set("X-Request-Id", g.reqPre+strconv.FormatUint(g.reqSeq.Add(1), 36))
		}
	})
	b.Run("request_id", func(b *testing.B) {
		b.ReportAllocs()
		rw := route.NewRecorder(w, nil)
		for b.Loop() {
			rw.SetRequestID(r, g.reqPre, g.reqSeq.Add(1))
		}
	})
	b.Run("probe_mark", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = g.routeTab.probe.hygiene(r)
		}
	})
	b.Run("trusted_peer/none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = edge.TrustedProxies(g.cfg.Server.TrustedNets()).Peer(r)
		}
	})
	b.Run("trusted_peer/one_cidr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = edge.TrustedProxies(gTrust.cfg.Server.TrustedNets()).Peer(r)
		}
	})
	b.Run("framing_check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = edge.FramingProblem(r.Context())
		}
	})
	b.Run("canonical_path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = edge.CanonicalPath(r.URL.EscapedPath())
		}
	})
	b.Run("client_allowed/rate_off/old", func(b *testing.B) {
		b.ReportAllocs()
		ip := access.ClientIP{Trusted: func(a netip.Addr) bool { return edge.TrustedProxies(g.cfg.Server.TrustedNets()).Has(a.AsSlice()) }}
		for b.Loop() {
			_ = g.gate.Limits().Client(ip.Of(r))
		}
	})
	b.Run("client_allowed/rate_off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = g.path.ClientAllowed(w, r)
		}
	})
	b.Run("client_allowed/rate_on", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = gRate.path.ClientAllowed(w, r)
		}
	})
	b.Run("client_ip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = g.gate.IP().Of(r)
		}
	})
	b.Run("self_probe_check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = route.IsSelfProbe(r)
		}
	})
	noop := func(http.ResponseWriter, *http.Request, string) {}
	b.Run("route/chi", func(b *testing.B) {
		mux := chi.NewRouter()
		mux.Handle("/apps/{slug}/*", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			noop(w, r, chi.URLParam(r, "slug"))
		}))
		b.ReportAllocs()
		for b.Loop() {
			mux.ServeHTTP(w, r)
		}
	})
	b.Run("route/split", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = g.path.ServePathRoute(w, benchMethodOnly)
		}
	})
	b.Run("route/lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = g.appBySlug("bench")
		}
	})
	b.Run("published", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = g.routeTab.Published(app.Slug())
		}
	})
	b.Run("time_now", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("metrics_observe", func(b *testing.B) {
		b.ReportAllocs()
		now := time.Now()
		status, fwd, headerAt := 200, now, now.Add(time.Millisecond)
		for b.Loop() {
			g.metrics.Observe("/apps/bench/small", status, fwd, headerAt)
		}
	})
	b.Run("access_log_off_by_level/old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.log.Log(r.Context(), slog.LevelInfo, "access", "method", r.Method, "path", r.URL.Path, "status", 200,
				"bytes", int64(1024), "ms", 0.25, "remote", r.RemoteAddr, "request_id", r.Header.Get("X-Request-Id"))
		}
	})
	b.Run("access_log_off_by_level", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if g.log.Enabled(r.Context(), slog.LevelInfo) {
				b.Fatal("info is on")
			}
		}
	})
	b.Run("home_conn_cap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			slot, err := g.homeConns.Acquire(r, "demo")
			if err != nil {
				b.Fatal(err)
			}
			g.homeConns.Release(slot)
		}
	})
	b.Run("session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.sessions.End(g.sessions.Begin("demo"))
		}
	})
	b.Run("warm_verdict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = g.engine.WarmAwake("demo")
		}
	})
}

// benchMethodOnly is a request the path routes leave to the router after
// the whole split (a name, no segment after it, an unknown method is
// checked first): it measures the split alone.
var benchMethodOnly = func() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://gw.example/apps//small", nil)
	return r
}()

// BenchmarkHygieneTrusted serves requests through the public handler
// from a trusted proxy (server.trusted_proxies) for a home that does not
// exist, so that what is measured is hygiene: the trusted-peer check, the
// forwarded client's connection count, the client's rate and a 404.
func BenchmarkHygieneTrusted(b *testing.B) {
	for _, c := range []struct{ name, extra string }{
		{"untrusted", ""},
		{"trusted", "server:\n  trusted_proxies: [127.0.0.0/8]\n"},
		{"trusted_rate", "server:\n  trusted_proxies: [127.0.0.0/8]\nlimits:\n  client_rate: 1000000\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := benchGateway(b, c.extra)
			h := g.routes()
			r := benchRequest("/node/nope/x")
			r.Header.Set("X-Forwarded-For", "198.51.100.7")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
				w.Body.Reset()
			}
		})
	}
}
