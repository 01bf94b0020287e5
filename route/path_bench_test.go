package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
)

// benchExchange is a response writer that records as the listener's does
// (route.Exchange), for the steps below.
type benchExchange struct {
	http.ResponseWriter
	route         forward.Route
	status        int
	fwd, headerAt time.Time
}

func (x *benchExchange) Route() *forward.Route { return &x.route }
func (x *benchExchange) AtEnd(func())          {}
func (x *benchExchange) Forwarding()           { x.fwd = time.Now() }
func (x *benchExchange) Answer() (int, time.Time, time.Time) {
	return x.status, x.fwd, x.headerAt
}

type benchDenials struct{}

func (benchDenials) Add(admin.Denial) {}

type benchCounters struct{}

func (benchCounters) RateLimited(string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
}

type benchVerdicts struct{}

func (benchVerdicts) Drop(string) {}

// BenchmarkPathSteps measures, one at a time, the request path's own
// steps for a warm request: the route it fills, the access gate of a
// public route, the forward's hooks and bookkeeping, and the app's
// passive observation. None may allocate.
func BenchmarkPathSteps(b *testing.B) {
	set, err := access.NewSet(access.Config{Default: access.PolicyPublic}, func(*http.Request) string { return "" },
		func(error) {})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	p := &Path{gate: NewGate(set, access.NewLimits(access.LimitsConfig{}), access.ClientIP{}, false, benchDenials{},
		benchCounters{}), verdicts: benchVerdicts{}}
	p.SetSettings(Settings{WakeTimeout: time.Second})
	w := &benchExchange{ResponseWriter: httptest.NewRecorder()}
	r := httptest.NewRequest(http.MethodGet, "http://gw.example/apps/bench/small", nil)
	home := NewHome(homes.Spec{ID: "demo", Target: "demo"})
	app := NewApp(registry.App{Slug: "bench", Upstream: "http://127.0.0.1:9/"}, 0, nil)
	app.SetPulse(&appstatus.Pulse{})

	b.Run("route/alloc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = newRoute(w, "app", "bench")
		}
	})
	b.Run("admit/public", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.admit(w, r, "app", "bench", nil)
		}
	})
	b.Run("mark_forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			markForward(w)
		}
	})
	b.Run("note_passive", func(b *testing.B) {
		b.ReportAllocs()
		now := time.Now()
		x := &benchExchange{status: 200, fwd: now, headerAt: now}
		for b.Loop() {
			notePassive(x, app)
		}
	})
	b.Run("forward_hooks/old", func(b *testing.B) {
		b.ReportAllocs()
		route := &forward.Route{}
		for b.Loop() {
			id := home.ID()
			route.OnFailure = func() { p.verdicts.Drop(id) }
			route.Retry = func(ctx context.Context) (*url.URL, error) {
				ctx, cancel := context.WithTimeout(ctx, p.conf().WakeTimeout)
				defer cancel()
				return p.engine.Redo(ctx, id)
			}
		}
	})
	b.Run("forward_hooks", func(b *testing.B) {
		b.ReportAllocs()
		route := &forward.Route{}
		for b.Loop() {
			hk := p.hooks(home)
			route.OnFailure, route.Retry = hk.OnFailure, hk.Retry
		}
	})
}
