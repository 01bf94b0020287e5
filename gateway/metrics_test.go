package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/wakegate/wakegate/internal/testbin"
)

// admScrape fetches /metrics from the admin listener and parses it with
// the Prometheus text parser.
func (a *admGateway) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	code, hdr, body := a.do(t, "GET", "/metrics", admToken, nil, nil)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", code, hdr.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// admValue returns the value of the sample of family name whose labels
// include want (0 when there is none).
func admValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// TestMetricsMoveWithActions scrapes /metrics around real actions: a cold
// request, a warm one, a suspend, a failed token and a lease, and checks
// the counters moved by exactly what was done. No label names a home.
func TestMetricsMoveWithActions(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	base := a.scrape(t)
	for _, name := range []string{"wakegate_requests_total", "wakegate_wakes_total", "wakegate_warm_hits_total",
		"wakegate_warm_misses_total", "wakegate_sessions", "wakegate_suspends_total", "wakegate_rolls_total",
		"wakegate_rate_limited_total", "wakegate_app_phase", "wakegate_wake_seconds", "wakegate_upstream_response_seconds"} {
		if base[name] == nil && name != "wakegate_suspends_total" && name != "wakegate_wake_seconds" {
			t.Errorf("metric %s missing", name)
		}
	}
	c := e2eClient(t)
	e2eGetWhoami(t, c, "http://"+a.addr+"/node/demo/whoami", nil) // cold: one wake
	e2eGetWhoami(t, c, "http://"+a.addr+"/node/demo/whoami", nil) // warm
	if res, _ := e2eGet(t, c, "http://"+a.addr+"/node/nobody/x", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown target: %d", res.StatusCode)
	}
	a.do(t, "GET", "/admin/status", "wrong-token-0123456789", nil, nil)
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/leases", admToken, nil, map[string]any{"ttl": "1m"}); code != http.StatusCreated {
		t.Fatalf("lease: %d %s", code, body)
	}

	delta := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
		return admValue(fams, name, labels) - admValue(base, name, labels)
	}
	var now map[string]*dto.MetricFamily
	// Wake metrics come from the event bus, a moment after the request.
	testbin.Eventually(t, "wake metrics", func() bool {
		now = a.scrape(t)
		return delta(now, "wakegate_wakes_total", map[string]string{"outcome": "ready", "cause": "cold"}) == 1
	})
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"wakegate_requests_total", map[string]string{"kind": "node", "code": "2xx"}, 2},
		{"wakegate_requests_total", map[string]string{"kind": "node", "code": "4xx"}, 1},
		{"wakegate_warm_misses_total", nil, 1},
		{"wakegate_warm_hits_total", nil, 1},
		{"wakegate_wake_seconds", map[string]string{"phase": "provider"}, 1},
		{"wakegate_wake_seconds", map[string]string{"phase": "probe"}, 1},
		{"wakegate_upstream_response_seconds", map[string]string{"kind": "node"}, 2},
		{"wakegate_admin_auth_failures_total", nil, 1},
		{"wakegate_sessions", nil, 1}, // the lease
	}
	for _, ck := range checks {
		if got := delta(now, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v moved by %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/suspend", admToken, nil, nil); code != http.StatusConflict {
		t.Fatalf("suspend with a lease: %d %s", code, body)
	}
	// No sample carries a home's or an app's name.
	for name, f := range now {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "demo" {
					t.Errorf("%s has label %s=demo: cardinality grows with homes", name, l.GetName())
				}
			}
		}
	}
}

// TestMetricsSuspendCounted checks a suspend moves the suspend counter.
func TestMetricsSuspendCounted(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	before := admValue(a.scrape(t), "wakegate_suspends_total", nil)
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/suspend", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("suspend: %d %s", code, body)
	}
	testbin.Eventually(t, "suspend counted", func() bool {
		return admValue(a.scrape(t), "wakegate_suspends_total", nil) == before+1
	})
	if got := admValue(a.scrape(t), "wakegate_wakes_total", map[string]string{"cause": "admin", "outcome": "ready"}); got != 1 {
		t.Errorf("admin wakes: %v, want 1", got)
	}
}

// TestMetricsRuntimeCollectors checks that /metrics carries the Go and
// process collectors on the gateway's own registry, so that leaks of
// goroutines, heap or file descriptors are visible.
func TestMetricsRuntimeCollectors(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	fams := a.scrape(t)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_threads",
		"process_open_fds", "process_max_fds", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	if v := admValue(fams, "go_goroutines", nil); v < 1 {
		t.Errorf("go_goroutines = %v, want at least 1", v)
	}
	if v := admValue(fams, "process_open_fds", nil); v < 1 {
		t.Errorf("process_open_fds = %v, want at least 1", v)
	}
}

// TestHTTP1ServerChoice: with server.http1_server: wakegate plain requests
// are served on the gateway's loop and a chunked one is handed to Go's
// server; with net/http the loop serves nothing. Both answer the same.
func TestHTTP1ServerChoice(t *testing.T) {
	t.Parallel()
	for _, choice := range []string{"wakegate", "net/http"} {
		t.Run(strings.ReplaceAll(choice, "/", "-"), func(t *testing.T) {
			t.Parallel()
			a := admStart(t, admDemo+"server:\n  http1_server: "+choice+"\n", "")
			base := a.scrape(t)
			c := e2eClient(t)
			e2eGetWhoami(t, c, "http://"+a.addr+"/node/demo/whoami", nil)
			e2eGetWhoami(t, c, "http://"+a.addr+"/node/demo/whoami", nil)
			// A body of unknown length goes out chunked.
			res, err := c.Post("http://"+a.addr+"/node/demo/whoami", "text/plain",
				io.MultiReader(strings.NewReader("chunked "), strings.NewReader("body")))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"body_bytes":12`) {
				t.Fatalf("chunked POST: %d %s", res.StatusCode, b)
			}
			checkLoopCounts(t, choice, base, a.scrape(t), 2, 1)
		})
	}
}

// checkLoopCounts checks what the HTTP/1.1 loop's counters grew by from
// the scrape base to now: with the loop on (http1_server wakegate), at
// least loop requests served there and handed connections handed off;
// with net/http, none ever.
func checkLoopCounts(t *testing.T, choice string, base, now map[string]*dto.MetricFamily, loop, handed float64) {
	t.Helper()
	served := admValue(now, "wakegate_http1_loop_requests_total", nil)
	gotLoop := served - admValue(base, "wakegate_http1_loop_requests_total", nil)
	gotHanded := admValue(now, "wakegate_http1_handoffs_total", nil) - admValue(base, "wakegate_http1_handoffs_total", nil)
	switch choice {
	case "wakegate":
		if gotLoop < loop || gotHanded < handed {
			t.Errorf("loop requests +%v, handoffs +%v; want at least %v and %v", gotLoop, gotHanded, loop, handed)
		}
	default:
		if served != 0 || gotHanded != 0 {
			t.Errorf("%s: loop requests %v, handoffs +%v; want none", choice, served, gotHanded)
		}
	}
}
