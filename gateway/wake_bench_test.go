package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// benchGateway runs an in-process gateway with one exec demo home whose
// boot takes bootDelay, and returns its base URL.
func benchGateway(b *testing.B, bootDelay string, probe string) (*gateway.Gateway, string, *testbin.LogBuffer) {
	b.Helper()
	bin := testbin.Build(b)
	dir := b.TempDir()
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
log: {level: info, access: false}
wake:
  idle_timeout: 0
  ready_timeout: 20s
  wake_timeout: 30s
  max_concurrent: 16
  probe: %s
exec:
  command: [%q, demo-home, --addr, "127.0.0.1:{port}", --target, "{target}", --version, "{version}", --boot-delay, %q]
  stop_grace: 2s
homes:
  - id: demo
`, filepath.Join(dir, "data"), probe, bin, bootDelay)
	c, err := all.Load("bench.yaml", []byte(cfg))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(ctx, c, gateway.NewLogger(c.Log, logs))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(ctx, ln)
	}()
	b.Cleanup(func() {
		_ = g.Engine().Suspend(context.Background(), "demo")
		cancel()
		<-done
		g.Close()
		testbin.KillHomes(filepath.Join(dir, "data"))
	})
	return g, "http://" + ln.Addr().String(), logs
}

// listeningAt asks the home when it started listening.
func listeningAt(b *testing.B, g *gateway.Gateway) time.Time {
	b.Helper()
	a, err := g.Engine().EnsureAwake(context.Background(), "demo")
	if err != nil {
		b.Fatal(err)
	}
	res, err := http.Get(a.Endpoint.String() + "/_demo/stats")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var st struct {
		ListeningAt int64 `json:"listening_at_unix_nano"`
	}
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, st.ListeningAt)
}

// BenchmarkColdWake measures the cold wake overhead: the time to first byte
// of a request through the gateway minus the moment the home (booting for
// 200ms) started listening. "adaptive" is the default probe pacing (2ms
// growing to 100ms, with the port watched during pauses); "fixed500ms"
// pauses 500ms between attempts with no port watch, the naive baseline.
func BenchmarkColdWake(b *testing.B) {
	for _, tc := range []struct{ name, probe string }{
		{"adaptive", "{kind: ws}"},
		{"fixed500ms", "{kind: ws, min_pause: 500ms, max_pause: 500ms, port_watch: 0}"},
		{"adaptiveNoWatch", "{kind: ws, port_watch: 0}"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g, base, _ := benchGateway(b, "200ms", tc.probe)
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			var overheads, ttfbs []float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := g.Engine().Suspend(context.Background(), "demo"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				res, err := client.Get(base + "/node/demo/whoami")
				if err != nil {
					b.Fatal(err)
				}
				first := time.Now()
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("status %d", res.StatusCode)
				}
				b.StopTimer()
				overheads = append(overheads, float64(first.Sub(listeningAt(b, g)).Microseconds())/1000)
				ttfbs = append(ttfbs, float64(first.Sub(start).Microseconds())/1000)
				b.StartTimer()
			}
			b.ReportMetric(median(overheads), "overhead-ms")
			b.ReportMetric(median(ttfbs), "ttfb-ms")
		})
	}
}

// BenchmarkColdStampede sends 1000 concurrent requests to one cold home
// and reports how many processes were started (must be 1), the p99 time
// to first byte, the wake's own time (from the start of the stampede to
// its ready event) and the p99 of what comes after it (the time from the
// ready event to each answer).
func BenchmarkColdStampede(b *testing.B) {
	g, base, logs := benchGateway(b, "200ms", "{kind: ws}")
	const n = 1000
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}}
	sub := g.Engine().Events().Subscribe(1024)
	defer sub.Close()
	var p99s, wakeMS, afterP99 []float64
	var starts []float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := g.Engine().Suspend(context.Background(), "demo"); err != nil {
			b.Fatal(err)
		}
		before := strings.Count(logs.String(), startedLine)
		b.StartTimer()
		t0 := time.Now()
		ends := make([]time.Time, n)
		lat := make([]float64, n)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed []string
		for j := 0; j < n; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				res, err := client.Get(base + "/node/demo/whoami")
				if err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
					return
				}
				ends[j] = time.Now()
				lat[j] = float64(ends[j].Sub(t0).Microseconds()) / 1000
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					mu.Lock()
					failed = append(failed, res.Status)
					mu.Unlock()
				}
			}(j)
		}
		wg.Wait()
		b.StopTimer()
		if len(failed) > 0 {
			b.Fatalf("%d requests failed, first: %s", len(failed), failed[0])
		}
		starts = append(starts, float64(strings.Count(logs.String(), startedLine)-before))
		sort.Float64s(lat)
		p99s = append(p99s, lat[n*99/100])
		if ready, ok := readyAt(sub); ok {
			wakeMS = append(wakeMS, float64(ready.Sub(t0).Microseconds())/1000)
			after := make([]float64, n)
			for j, e := range ends {
				after[j] = float64(e.Sub(ready).Microseconds()) / 1000
			}
			sort.Float64s(after)
			afterP99 = append(afterP99, after[n*99/100])
		}
		b.StartTimer()
	}
	b.ReportMetric(median(starts), "wakes")
	b.ReportMetric(median(p99s), "p99-ttfb-ms")
	b.ReportMetric(median(wakeMS), "wake-ms")
	b.ReportMetric(median(afterP99), "p99-after-wake-ms")
}

// readyAt drains sub and returns the time of the last wake.ready event.
func readyAt(sub *events.Subscription) (time.Time, bool) {
	var at time.Time
	for {
		select {
		case ev := <-sub.C:
			if ev.Type == events.WakeReady {
				at = ev.Time
			}
		default:
			return at, !at.IsZero()
		}
	}
}

// startedLine is what the exec provider logs once per process it starts.
const startedLine = `msg="exec: started home"`

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
