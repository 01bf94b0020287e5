package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
)

// BenchmarkAppPublish measures the time from an upstream becoming healthy
// to its route being published (the route.published event), with the
// health interval at 200ms: the aim is a median under interval + 50ms. Each
// of 20 runs per iteration (median reported as publish-ms) starts from an
// unpublished route whose upstream answers 503.
func BenchmarkAppPublish(b *testing.B) {
	const interval = 200 * time.Millisecond
	up := newTestUpstream(b, "/h", statusHandler(http.StatusServiceUnavailable))
	gw := startAppGateway(b, "apps:\n"+appEntry("x", up.URL, "api", "    health: {path: /h, interval: 200ms}\n    min_refresh: 1ms\n    failure_threshold: 1\n"))
	gw.waitReason(b, "x", appstatus.ReasonUnhealthy)
	sub := gw.g.Engine().Events().Subscribe(64)
	defer sub.Close()
	next := func(typ string) events.Event {
		deadline := time.After(testbin.WaitLimit)
		for {
			select {
			case e := <-sub.C:
				if e.App == "x" && e.Type == typ {
					return e
				}
			case <-deadline:
				b.Fatalf("no %s event", typ)
			}
		}
	}
	var all []float64
	for i := 0; i < b.N; i++ {
		var runs []float64
		for range 20 {
			// A random phase against the observation ticker, as in life.
			time.Sleep(time.Duration(len(runs)*37%200) * time.Millisecond)
			healthy := time.Now()
			up.set(statusHandler(http.StatusOK))
			e := next(events.RoutePublished)
			runs = append(runs, float64(e.Time.Sub(healthy).Microseconds())/1000)
			up.set(statusHandler(http.StatusServiceUnavailable))
			next(events.RouteWithdrawn)
		}
		all = append(all, runs...)
	}
	b.ReportMetric(median(all), "publish-ms")
	b.ReportMetric(float64(interval.Milliseconds()+50), "aim-ms")
}
