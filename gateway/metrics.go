package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wakegate/wakegate/wake"
)

// Route kinds of the request metrics: a bounded set, whatever the number
// of homes and apps (no label ever names a home or an app).
const (
	kindApp = iota
	kindNode
	kindInternal // /_wakegate/...
	kindHealth   // /healthz, /readyz
	kindOther
	nKinds
)

var kindNames = [nKinds]string{"app", "node", "internal", "health", "other"}

// statusClasses are the status labels: 1xx (101 for WebSockets) to 5xx.
var statusClasses = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// metrics are the gateway's Prometheus metrics, on a registry of their own
// (never the global one), served at /metrics on the admin listener, with
// the Go and process collectors (go_*, process_*) beside them. The
// request path touches only pre-resolved counters and histograms. Wake,
// suspend, roll and home-failure counts are made at the source: the engine
// calls engineMetrics (wake.Metrics). Only the app phase gauge follows the
// event bus.
type metrics struct {
	reg *prometheus.Registry

	requests [nKinds][len(statusClasses)]prometheus.Counter
	upstream [2]prometheus.Observer // app, node

	rateLimited  *prometheus.CounterVec // scope
	connsRefused prometheus.Counter     // connections past server.max_conns_per_client
	authFailures prometheus.Counter
	routePhases  *prometheus.GaugeVec // phase

	mu       sync.Mutex
	appPhase map[string]string // last phase seen per app, for routePhases

	stop context.CancelFunc
	done chan struct{}
}

// wakeCauses bounds the cause label to the engine's known causes; any
// other is counted as "other".
var wakeCauses = map[string]bool{"cold": true, wake.CauseVerify: true, "adopt": true, "roll": true, "admin": true}

// engineMetrics are the engine's counts, made where things happen (the
// engine calls them; see wake.Metrics). No label names a home.
type engineMetrics struct {
	wakes        *prometheus.CounterVec // outcome, cause
	wakeSeconds  *prometheus.HistogramVec
	joined       prometheus.Counter
	stops        *prometheus.CounterVec // proven
	suspends     *prometheus.CounterVec // how
	rolls        *prometheus.CounterVec // outcome
	homeFailures prometheus.Counter
	refreshes    *prometheus.CounterVec // outcome
}

func newEngineMetrics() *engineMetrics {
	m := &engineMetrics{
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_wakes_total",
			Help: "Wakes finished, by outcome (ready, failed) and cause (cold, verify: a running home only proven ready again, adopt, roll, admin, other).",
		}, []string{"outcome", "cause"}),
		wakeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wakegate_wake_seconds",
			Help:    "Time of successful wakes, split into phase provider (start or resume), probe (readiness) and total; re-verifications of running homes (cause verify) are not timed here.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"phase"}),
		joined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_wake_joined_total",
			Help: "Callers that joined a wake already in flight instead of starting one.",
		}),
		stops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_wake_stop_total",
			Help: "Stops of half-woken homes after a failed wake or rollback, by whether the provider proved the home down (proven=false: a process may be left running).",
		}, []string{"proven"}),
		suspends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_suspends_total",
			Help: "Homes suspended (how=suspend) or stopped (how=stop) while idle or on request.",
		}, []string{"how"}),
		rolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_rolls_total",
			Help: "Rolls finished, by outcome (done, rolled_back, incident).",
		}, []string{"outcome"}),
		homeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_home_failures_total",
			Help: "Homes the provider gave up on (restart budget spent).",
		}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_refreshes_total",
			Help: "Refreshes of a home from its provider's state (an operator's, or at start), by outcome (changed, unchanged, unknown: the provider did not say).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"changed", "unchanged", "unknown"} {
		m.refreshes.WithLabelValues(o)
	}
	for _, o := range []string{"ready", "failed"} {
		for c := range wakeCauses {
			m.wakes.WithLabelValues(o, c)
		}
	}
	for _, o := range []string{"done", "rolled_back", "incident"} {
		m.rolls.WithLabelValues(o)
	}
	for _, p := range []string{"true", "false"} {
		m.stops.WithLabelValues(p)
	}
	return m
}

func (m *engineMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wakes, m.wakeSeconds, m.joined, m.stops, m.suspends, m.rolls, m.homeFailures, m.refreshes}
}

// WakeDone counts a finished wake and, for a ready one, its phases.
func (m *engineMetrics) WakeDone(outcome, cause string, provider, probe, total time.Duration) {
	if !wakeCauses[cause] {
		cause = "other"
	}
	if outcome != "ready" {
		outcome = "failed"
	}
	m.wakes.WithLabelValues(outcome, cause).Inc()
	// A re-verification started nothing: its timing is no wake's.
	if outcome == "ready" && cause != wake.CauseVerify {
		m.wakeSeconds.WithLabelValues("provider").Observe(provider.Seconds())
		m.wakeSeconds.WithLabelValues("probe").Observe(probe.Seconds())
		m.wakeSeconds.WithLabelValues("total").Observe(total.Seconds())
	}
}

// WakeJoined counts a caller that joined a wake in flight.
func (m *engineMetrics) WakeJoined() { m.joined.Inc() }

// WakeStopped counts the stop of a half-woken home.
func (m *engineMetrics) WakeStopped(proven bool) {
	m.stops.WithLabelValues(strconv.FormatBool(proven)).Inc()
}

// Suspended counts a suspend or stop of an idle home.
func (m *engineMetrics) Suspended(how string) {
	if how != "suspend" && how != "stop" {
		how = "other"
	}
	m.suspends.WithLabelValues(how).Inc()
}

// Rolled counts a finished roll.
func (m *engineMetrics) Rolled(outcome string) {
	switch outcome {
	case "done", "rolled_back", "incident":
	default:
		outcome = "other"
	}
	m.rolls.WithLabelValues(outcome).Inc()
}

// HomeFailed counts a home its provider gave up on.
func (m *engineMetrics) HomeFailed() { m.homeFailures.Inc() }

var _ wake.Metrics = (*engineMetrics)(nil)

func newMetrics(g *Gateway, em *engineMetrics) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), appPhase: map[string]string{}}
	req := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wakegate_requests_total",
		Help: "Requests served on the public listener, by route kind and status class.",
	}, []string{"kind", "code"})
	for k := range nKinds {
		for c, class := range statusClasses {
			m.requests[k][c] = req.WithLabelValues(kindNames[k], class)
		}
	}
	up := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wakegate_upstream_response_seconds",
		Help:    "Time from forwarding a request to the upstream's response headers (wake waits excluded), by route kind.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"kind"})
	m.upstream[kindApp] = up.WithLabelValues("app")
	m.upstream[kindNode] = up.WithLabelValues("node")
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wakegate_rate_limited_total",
		Help: "Requests refused with 429, by scope (admin_auth: failed admin token checks).",
	}, []string{"scope"})
	m.connsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wakegate_conns_refused_total",
		Help: "Public connections closed on accept because their client IP had server.max_conns_per_client open.",
	})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wakegate_admin_auth_failures_total",
		Help: "Admin requests refused for a missing or wrong token.",
	})
	m.routePhases = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "wakegate_app_phase",
		Help: "Apps in each phase (ready, starting, stopped, failed), as last reported.",
	}, []string{"phase"})
	for _, p := range []string{"ready", "starting", "stopped", "failed"} {
		m.routePhases.WithLabelValues(p)
	}
	m.rateLimited.WithLabelValues("admin_auth")
	m.reg.MustRegister(em.collectors()...)
	m.reg.MustRegister(req, up, m.rateLimited, m.connsRefused, m.authFailures, m.routePhases)
	m.reg.MustRegister(stateMetrics(g)...)
	// The Go runtime (goroutines, heap, GC) and the process (open and
	// maximum file descriptors, memory, CPU), so that leaks show.
	m.reg.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// stateMetrics are read when scraped: the engine's own counters (warm
// hits and misses, idle ticks, dropped events) and the gateway's state.
func stateMetrics(g *Gateway) []prometheus.Collector {
	eng := g.engine
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_warm_hits_total",
			Help: "Requests for homes answered by a fresh warm verdict (no store read, provider call or probe).",
		}, func() float64 { return float64(eng.Stats().WarmHits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_warm_misses_total",
			Help: "Requests for homes that found no fresh warm verdict and joined or started a wake.",
		}, func() float64 { return float64(eng.Stats().WarmMisses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_idle_ticks_total",
			Help: "Rounds of the engine's idle loop (suspends, session reports, eager rolls) that finished.",
		}, func() float64 { return float64(eng.Stats().IdleTicks) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "wakegate_sessions",
			Help: "Live sessions on this instance (requests, WebSockets and leases), over all homes.",
		}, func() float64 {
			n := 0
			for _, c := range g.sessions.Snapshot() {
				n += c
			}
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_http1_loop_requests_total",
			Help: "Plain HTTP/1.1 requests served on the gateway's own loop (server.http1_server: wakegate).",
		}, func() float64 { return float64(g.http1Stats().Requests) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_http1_handoffs_total",
			Help: "Connections the gateway's HTTP/1.1 loop handed to Go's server: an upgrade, Expect, a chunked or HTTP/1.0 request, or anything unusual.",
		}, func() float64 { return float64(g.http1Stats().HandedOff) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "wakegate_homes",
			Help: "Homes registered on this instance.",
		}, func() float64 { return float64(g.homeCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "wakegate_events_dropped_total",
			Help: "Engine events dropped for slow subscribers (event streams, the app phase gauge).",
		}, func() float64 {
			if b := eng.Events(); b != nil {
				return float64(b.Dropped())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "wakegate_draining",
			Help: "1 while the gateway drains for shutdown.",
		}, func() float64 {
			if g.draining.Load() {
				return 1
			}
			return 0
		}),
	}
}

// start follows the engine's events until stopMetrics; the goroutine is
// owned by the gateway (Close stops it).
func (m *metrics) start(bus *wake.Bus) {
	ctx, cancel := context.WithCancel(context.Background())
	m.stop, m.done = cancel, make(chan struct{})
	if bus == nil {
		close(m.done)
		return
	}
	sub := bus.Subscribe(1024)
	go func() {
		defer close(m.done)
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sub.C:
				m.event(ev)
			}
		}
	}()
}

func (m *metrics) close() {
	if m == nil || m.stop == nil {
		return
	}
	m.stop()
	<-m.done
}

// event follows the app phases of the engine's events. Counters are not
// made here: the bus drops events for slow subscribers.
func (m *metrics) event(ev wake.Event) {
	switch ev.Type {
	case wake.EventAppPhase:
		if ev.App == "" {
			return
		}
		phase, _, _ := strings.Cut(ev.Phase, "/")
		m.mu.Lock()
		defer m.mu.Unlock()
		if old, ok := m.appPhase[ev.App]; ok {
			m.routePhases.WithLabelValues(old).Dec()
		}
		m.appPhase[ev.App] = phase
		m.routePhases.WithLabelValues(phase).Inc()
	case wake.EventAppRemoved:
		// An app removed through the admin API no longer counts.
		m.mu.Lock()
		defer m.mu.Unlock()
		if old, ok := m.appPhase[ev.App]; ok {
			m.routePhases.WithLabelValues(old).Dec()
			delete(m.appPhase, ev.App)
		}
	}
}

// routeKind sorts a canonical request path into a route kind.
func routeKind(p string) int {
	switch {
	case strings.HasPrefix(p, "/apps/"):
		return kindApp
	case strings.HasPrefix(p, "/node/"):
		return kindNode
	case strings.HasPrefix(p, "/_wakegate/"):
		return kindInternal
	case p == "/healthz" || p == "/readyz":
		return kindHealth
	}
	return kindOther
}

// observe records one public request: its kind and status class, and for
// forwarded requests the upstream's time to response headers.
func (m *metrics) observe(path string, rw *recorder) {
	k := routeKind(path)
	status := rw.status
	if status == 0 {
		status = http.StatusSwitchingProtocols // hijacked
	}
	c := status / 100
	if c < 1 || c > 5 {
		c = 0
	}
	m.requests[k][c].Inc()
	if k <= kindNode && !rw.fwd.IsZero() && !rw.headerAt.IsZero() && rw.headerAt.After(rw.fwd) {
		m.upstream[k].Observe(rw.headerAt.Sub(rw.fwd).Seconds())
	}
}

// markForward notes, on the recorder hygiene wrapped w in, that the request
// is being forwarded now (after any wake wait).
func markForward(w http.ResponseWriter) {
	if rw, ok := w.(*recorder); ok {
		rw.fwd = time.Now()
	}
}

// handler serves the metrics in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: false})
}

// Refreshed counts a finished refresh of a home.
func (m *engineMetrics) Refreshed(outcome string) {
	switch outcome {
	case "changed", "unchanged", "unknown":
	default:
		outcome = "other"
	}
	m.refreshes.WithLabelValues(outcome).Inc()
}
