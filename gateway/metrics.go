package gateway

import (
	"github.com/wakegate/wakegate/h1serve"
)

// metricState is what the gateway's gauges read when scraped
// (telemetry.State).
type metricState struct{ g *Gateway }

func (s metricState) Sessions() int {
	n := 0
	for _, c := range s.g.sessions.Snapshot() {
		n += c
	}
	return n
}

func (s metricState) Homes() int                { return s.g.homeCount() }
func (s metricState) Draining() bool            { return s.g.draining.Load() }
func (s metricState) HTTP1Stats() h1serve.Stats { return s.g.http1Stats() }

func (s metricState) AppPhases() []string {
	if s.g.routeTab == nil {
		return nil
	}
	all := s.g.routeTab.Observer().List()
	out := make([]string, len(all))
	for i, a := range all {
		out[i] = string(a.Phase)
	}
	return out
}
