package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/tlsfront"
)

// Certificate operations: the front door's obtained, renewed and failed
// events go to the event stream, the days to expiry of each managed name
// to /metrics (at most maxExpiryNames names, the soonest to expire), and
// the inventory to GET /admin/certificates.

// tlsMetrics count where the HTTPS listener refuses: handshakes that did
// not complete (no certificate for the name, a bad client, a timeout) and
// on-demand names refused, by reason.
type tlsMetrics struct {
	handshakeFailed prometheus.Counter
	refused         *prometheus.CounterVec
}

// registerTLSMetrics registers the certificate expiry collector and the
// TLS counters on the gateway's registry.
func (g *Gateway) registerTLSMetrics() error {
	g.tlsMetrics.handshakeFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wakegate_tls_handshake_failures_total",
		Help: "TLS handshakes on the HTTPS listener that did not complete (no certificate for the name, a bad client, a timeout).",
	})
	g.tlsMetrics.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "wakegate_tls_on_demand_refused_total",
		Help: "Names refused an on-demand certificate, by reason (not_a_host, not_allowed, rate_limited).",
	}, []string{"reason"})
	for _, r := range []string{tlsfront.ReasonNotAHost, tlsfront.ReasonNotAllowed, tlsfront.ReasonRateLimited} {
		g.tlsMetrics.refused.WithLabelValues(r)
	}
	if err := g.metrics.Register(newCertCollector(g.front), g.tlsMetrics.handshakeFailed, g.tlsMetrics.refused); err != nil {
		return fmt.Errorf("tls metrics: %w", err)
	}
	return nil
}

// maxExpiryNames bounds the series of wakegate_certificate_expiry_days.
const maxExpiryNames = 100

// publishCertEvent puts a certificate event on the engine's event stream.
func (g *Gateway) publishCertEvent(ev tlsfront.Event) {
	e := events.Event{Type: events.CertObtained, Message: "certificate obtained for " + ev.Identifier}
	switch {
	case ev.Name == "cert_failed":
		e.Type, e.Message = "certificate.failed", "certificate not obtained for "+ev.Identifier
		if ev.Renewal {
			e.Message = "certificate not renewed for " + ev.Identifier
		}
		e.Reason = "ca_or_challenge_failed"
	case ev.Renewal:
		e.Type, e.Message = "certificate.renewed", "certificate renewed for "+ev.Identifier
	}
	g.engine.Events().Publish(e)
}

// certCollector reports wakegate_certificate_expiry_days per managed name.
type certCollector struct {
	front *tlsfront.Front
	desc  *prometheus.Desc
}

func newCertCollector(f *tlsfront.Front) *certCollector {
	return &certCollector{front: f, desc: prometheus.NewDesc("wakegate_certificate_expiry_days",
		fmt.Sprintf("Days until the served certificate of each managed name expires (negative once expired; at most %d names, the soonest first).", maxExpiryNames),
		[]string{"name"}, nil)}
}

// Describe sends the one metric's description.
func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect reports the names that have a certificate.
func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	var served []tlsfront.CertInfo
	for _, ci := range c.front.Certificates() {
		if !ci.NotAfter.IsZero() {
			served = append(served, ci)
		}
	}
	sort.Slice(served, func(i, j int) bool { return served[i].NotAfter.Before(served[j].NotAfter) })
	for _, ci := range served[:min(len(served), maxExpiryNames)] {
		days := time.Until(ci.NotAfter).Hours() / 24
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, days, ci.Name)
	}
}

// certificatesHandler serves GET /admin/certificates: the TLS mode and
// every managed name with its certificate, status and last event.
func (g *Gateway) certificatesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		out := struct {
			Mode         string              `json:"mode"`
			Certificates []tlsfront.CertInfo `json:"certificates"`
		}{Mode: g.cfg.TLS.Mode, Certificates: []tlsfront.CertInfo{}}
		if g.front != nil {
			out.Certificates = g.front.Certificates()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(out)
	})
}
