// Package telemetry holds the gateway's Prometheus metrics, on a registry
// of their own (never the global one), served at /metrics on the admin
// listener with the Go and process collectors beside them.
//
// Counts are made at the source: the request path touches only counters
// and histograms resolved in advance (Observe), the wake engine calls
// Engine (wake.Metrics), and every gauge is read from state when scraped
// (State), so that no metric follows an event bus that may drop events.
// No label ever names a home, an app or a client: the label sets are
// bounded whatever the number of tenants.
//
// DESIGN: counts are made at the source, never from the event bus
// (whose subscribers may drop), and no label names a tenant.
package telemetry

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/h1serve"
	"github.com/wakegate/wakegate/wake"
)

// Route kinds of the request metrics: a bounded set, whatever the number
// of homes and apps.
const (
	KindApp      = iota // /apps/...
	KindNode            // /node/...
	KindInternal        // /_wakegate/...
	KindHealth          // /healthz, /readyz
	KindOther
	nKinds
)

var kindNames = [nKinds]string{"app", "node", "internal", "health", "other"}

// statusClasses are the status labels: 1xx (101 for WebSockets) to 5xx.
var statusClasses = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// appPhases are the phases the app gauge reports, every one present even
// at 0.
var appPhases = []string{"ready", "starting", "stopped", "failed"}

// State is what the gauges read when scraped.
type State interface {
	// Sessions is the number of live sessions on this instance (requests,
	// WebSockets and leases), over all homes.
	Sessions() int
	// Homes is the number of homes registered on this instance.
	Homes() int
	// Draining reports whether the gateway drains for shutdown.
	Draining() bool
	// HTTP1Stats are the counts of the gateway's own HTTP/1.1 loop.
	HTTP1Stats() h1serve.Stats
	// AppPhases is the phase of every app observed here, one entry per
	// app ("ready", "starting", "stopped", "failed").
	AppPhases() []string
}

// EngineState is what the gauges read of the wake engine.
type EngineState interface {
	Stats() wake.Stats
	Events() *events.Bus
}

// Metrics are the gateway's metrics.
type Metrics struct {
	reg *prometheus.Registry

	requests [nKinds][len(statusClasses)]prometheus.Counter
	upstream [2]prometheus.Observer // app, node

	rateLimited  *prometheus.CounterVec // scope
	connsRefused prometheus.Counter
	authFailures prometheus.Counter
}

// New makes the gateway's metrics: the request counts, the engine's counts
// em, and the gauges read from eng and st when scraped.
func New(em *Engine, eng EngineState, st State) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	req := counterVec("wakegate_requests_total",
		"Requests served on the public listener, by route kind and status class.",
		"kind", "code")
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
	m.upstream[KindApp] = up.WithLabelValues("app")
	m.upstream[KindNode] = up.WithLabelValues("node")
	m.rateLimited = counterVec("wakegate_rate_limited_total",
		"Requests refused with 429, by scope (admin_auth: failed admin token checks).",
		"scope")
	present(m.rateLimited, "admin_auth")
	m.connsRefused = counter("wakegate_conns_refused_total",
		"Public connections closed on accept because their client IP had server.max_conns_per_client open.")
	m.authFailures = counter("wakegate_admin_auth_failures_total",
		"Admin requests refused for a missing or wrong token.")
	m.reg.MustRegister(em.collectors()...)
	m.reg.MustRegister(req, up, m.rateLimited, m.connsRefused, m.authFailures)
	m.reg.MustRegister(&phaseCollector{st: st, desc: prometheus.NewDesc("wakegate_app_phase",
		"Apps in each phase (ready, starting, stopped, failed), read when scraped.", []string{"phase"}, nil)})
	m.reg.MustRegister(stateGauges(eng, st)...)
	// The Go runtime (goroutines, heap, GC) and the process (open and
	// maximum file descriptors, memory, CPU), so that leaks show.
	m.reg.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// stateGauges are read when scraped: the engine's own counters (warm hits
// and misses, idle ticks, dropped events) and the gateway's state.
func stateGauges(eng EngineState, st State) []prometheus.Collector {
	return []prometheus.Collector{
		counterFunc("wakegate_warm_hits_total",
			"Requests for homes answered by a fresh warm verdict (no store read, provider call or probe).",
			func() float64 { return float64(eng.Stats().WarmHits) }),
		counterFunc("wakegate_warm_misses_total",
			"Requests for homes that found no fresh warm verdict and joined or started a wake.",
			func() float64 { return float64(eng.Stats().WarmMisses) }),
		counterFunc("wakegate_idle_ticks_total",
			"Rounds of the engine's idle loop (suspends, session reports, eager rolls) that finished.",
			func() float64 { return float64(eng.Stats().IdleTicks) }),
		counterFunc("wakegate_fleet_fenced_exits_total",
			"Exits of a home's process this gateway saw and did not answer with a restart: it no longer held the home in its fleet (heartbeat lapsed, or another gateway runs or stopped it).",
			func() float64 { return float64(eng.Stats().FencedExits) }),
		counterFunc("wakegate_fleet_fenced_stops_total",
			"Processes this gateway had started for a home that had passed to another gateway of its fleet, and stopped once it learnt so.",
			func() float64 { return float64(eng.Stats().FencedStops) }),
		gaugeFunc("wakegate_sessions",
			"Live sessions on this instance (requests, WebSockets and leases), over all homes.",
			func() float64 { return float64(st.Sessions()) }),
		counterFunc("wakegate_http1_loop_requests_total",
			"Plain HTTP/1.1 requests served on the gateway's own loop (server.http1_server: wakegate).",
			func() float64 { return float64(st.HTTP1Stats().Requests) }),
		counterFunc("wakegate_http1_handoffs_total",
			"Connections the gateway's HTTP/1.1 loop handed to Go's server: an upgrade, Expect, a chunked or HTTP/1.0 request, anything unusual, or HTTP/2 over TLS.",
			func() float64 { return float64(st.HTTP1Stats().HandedOff) }),
		gaugeFunc("wakegate_homes",
			"Homes registered on this instance.",
			func() float64 { return float64(st.Homes()) }),
		counterFunc("wakegate_events_dropped_total",
			"Engine events dropped for slow subscribers (event streams, the waiting pages).",
			func() float64 {
				if b := eng.Events(); b != nil {
					return float64(b.Dropped())
				}
				return 0
			}),
		gaugeFunc("wakegate_draining",
			"1 while the gateway drains for shutdown.",
			func() float64 {
				if st.Draining() {
					return 1
				}
				return 0
			}),
	}
}

// phaseCollector reports the apps per phase from State when scraped.
type phaseCollector struct {
	st   State
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	n := make(map[string]int, len(appPhases))
	for _, p := range c.st.AppPhases() {
		p, _, _ = strings.Cut(p, "/")
		n[p]++
	}
	for _, p := range appPhases {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[p]), p)
		delete(n, p)
	}
	for p, k := range n { // a phase this list does not know yet
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(k), p)
	}
}

// RouteKind sorts a canonical request path into a route kind.
func RouteKind(p string) int {
	switch {
	case strings.HasPrefix(p, "/apps/"):
		return KindApp
	case strings.HasPrefix(p, "/node/"):
		return KindNode
	case strings.HasPrefix(p, "/_wakegate/"):
		return KindInternal
	case p == "/healthz" || p == "/readyz":
		return KindHealth
	}
	return KindOther
}

// Observe records one public request: its kind and status class (0 is a
// hijacked connection, counted as 101), and for a forwarded request the
// upstream's time to response headers, from fwd (when it was forwarded,
// after any wake wait) to header; either zero leaves the time out.
func (m *Metrics) Observe(path string, status int, fwd, header time.Time) {
	k := RouteKind(path)
	if status == 0 {
		status = http.StatusSwitchingProtocols
	}
	c := status / 100
	if c < 1 || c > 5 {
		c = 0
	}
	m.requests[k][c].Inc()
	if k <= KindNode && !fwd.IsZero() && !header.IsZero() && header.After(fwd) {
		m.upstream[k].Observe(header.Sub(fwd).Seconds())
	}
}

// RateLimited is the counter of requests refused with 429 in scope
// (client, wake, waiting, admin_auth).
func (m *Metrics) RateLimited(scope string) prometheus.Counter {
	return m.rateLimited.WithLabelValues(scope)
}

// ConnsRefused counts public connections closed on accept for their
// client's connection cap.
func (m *Metrics) ConnsRefused() prometheus.Counter { return m.connsRefused }

// AuthFailures counts admin requests refused for a missing or wrong token.
func (m *Metrics) AuthFailures() prometheus.Counter { return m.authFailures }

// Register adds collectors of other parts (access denials, certificates,
// home connections) to the registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: false})
}

// counter, counterVec, counterFunc and gaugeFunc make a metric from its
// name and help (and labels, or the function read when scraped).
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func counterFunc(name, help string, f func() float64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

func gaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// present makes each of values, of vec's one label, exist at 0.
func present(vec *prometheus.CounterVec, values ...string) {
	for _, v := range values {
		vec.WithLabelValues(v)
	}
}
