package telemetry

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/wake"
)

// wakeCauses bounds the cause label to the engine's known causes; any
// other is counted as "other".
var wakeCauses = map[string]bool{"cold": true, wake.CauseVerify: true, wake.CauseWaited: true, "adopt": true, "roll": true, "admin": true, wake.CauseSchedule: true}

// rollOutcomes and refreshOutcomes bound the outcome labels of rolls and
// refreshes; any other is counted as "other".
var (
	rollOutcomes    = []string{"done", "rolled_back", "incident"}
	refreshOutcomes = []string{"changed", "unchanged", "unknown"}
)

// Engine holds the wake engine's counts, made where things happen: the
// engine calls its methods (it implements wake.Metrics), so a count never
// depends on an event bus that may drop events. No label names a home.
type Engine struct {
	wakes        *prometheus.CounterVec // outcome, cause
	wakeSeconds  *prometheus.HistogramVec
	joined       prometheus.Counter
	stops        *prometheus.CounterVec // proven
	suspends     *prometheus.CounterVec // how
	rolls        *prometheus.CounterVec // outcome
	homeFailures prometheus.Counter
	refreshes    *prometheus.CounterVec // outcome
}

// NewEngine makes the engine's counters, every known label already
// present (at 0) so that dashboards see them before the first event.
func NewEngine() *Engine {
	m := &Engine{
		wakes: counterVec("wakegate_wakes_total",
			"Wakes finished, by outcome (ready, failed) and cause (cold, verify: a running home only proven ready again, waited: another gateway or operation woke the home while this wake waited, adopt, roll, admin, other).",
			"outcome", "cause"),
		wakeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wakegate_wake_seconds",
			Help:    "Time of successful wakes, split into phase provider (start or resume), probe (readiness) and total; re-verifications of running homes (cause verify) and waits for another gateway's wake (cause waited) are not timed here.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"phase"}),
		joined: counter("wakegate_wake_joined_total",
			"Callers that joined a wake already in flight instead of starting one."),
		stops: counterVec("wakegate_wake_stop_total",
			"Stops of half-woken homes after a failed wake or rollback, by whether the provider proved the home down (proven=false: a process may be left running).",
			"proven"),
		suspends: counterVec("wakegate_suspends_total",
			"Homes suspended (how=suspend) or stopped (how=stop) while idle or on request.",
			"how"),
		rolls: counterVec("wakegate_rolls_total",
			"Rolls finished, by outcome (done, rolled_back, incident).",
			"outcome"),
		homeFailures: counter("wakegate_home_failures_total",
			"Homes the provider gave up on (restart budget spent)."),
		refreshes: counterVec("wakegate_refreshes_total",
			"Refreshes of a home from its provider's state (an operator's, or at start), by outcome (changed, unchanged, unknown: the provider did not say).",
			"outcome"),
	}
	present(m.refreshes, refreshOutcomes...)
	for _, o := range []string{"ready", "failed"} {
		for c := range wakeCauses {
			m.wakes.WithLabelValues(o, c)
		}
	}
	present(m.rolls, rollOutcomes...)
	present(m.stops, "true", "false")
	return m
}

// collectors are the engine counters, for a registry.
func (m *Engine) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wakes, m.wakeSeconds, m.joined, m.stops, m.suspends, m.rolls, m.homeFailures, m.refreshes}
}

// WakeDone counts a finished wake and, for a ready one, its phases.
func (m *Engine) WakeDone(outcome, cause string, provider, probe, total time.Duration) {
	if !wakeCauses[cause] {
		cause = "other"
	}
	if outcome != "ready" {
		outcome = "failed"
	}
	m.wakes.WithLabelValues(outcome, cause).Inc()
	// A re-verification, or a wait for another operation's wake, started
	// nothing here: its timing is no wake's.
	if outcome == "ready" && cause != wake.CauseVerify && cause != wake.CauseWaited {
		m.wakeSeconds.WithLabelValues("provider").Observe(provider.Seconds())
		m.wakeSeconds.WithLabelValues("probe").Observe(probe.Seconds())
		m.wakeSeconds.WithLabelValues("total").Observe(total.Seconds())
	}
}

// WakeJoined counts a caller that joined a wake in flight.
func (m *Engine) WakeJoined() { m.joined.Inc() }

// WakeStopped counts the stop of a half-woken home.
func (m *Engine) WakeStopped(proven bool) {
	m.stops.WithLabelValues(strconv.FormatBool(proven)).Inc()
}

// Suspended counts a suspend or stop of an idle home.
func (m *Engine) Suspended(how string) {
	if how != "suspend" && how != "stop" {
		how = "other"
	}
	m.suspends.WithLabelValues(how).Inc()
}

// Rolled counts a finished roll.
func (m *Engine) Rolled(outcome string) {
	if !slices.Contains(rollOutcomes, outcome) {
		outcome = "other"
	}
	m.rolls.WithLabelValues(outcome).Inc()
}

// HomeFailed counts a home its provider gave up on.
func (m *Engine) HomeFailed() { m.homeFailures.Inc() }

// Refreshed counts a finished refresh of a home.
func (m *Engine) Refreshed(outcome string) {
	if !slices.Contains(refreshOutcomes, outcome) {
		outcome = "other"
	}
	m.refreshes.WithLabelValues(outcome).Inc()
}

var _ wake.Metrics = (*Engine)(nil)
