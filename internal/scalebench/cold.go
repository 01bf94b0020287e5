package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// coldResult is one stampede on cold homes.
type coldResult struct {
	wakes    float64 // wakes the gateway counted
	p50, p99 float64 // time to the answer, ms
	max      float64
	cpuPer   float64 // the gateway's CPU per caller, µs
	failed   int
	first    string // the first failure
}

// stats are the medians of stampede rounds.
type stats struct{ p50, p99, max, wakes, cpu []float64 }

func (s *stats) add(r coldResult) {
	s.p50, s.p99, s.max, s.wakes = append(s.p50, r.p50), append(s.p99, r.p99), append(s.max, r.max), append(s.wakes, r.wakes)
	s.cpu = append(s.cpu, r.cpuPer)
}

func (s *stats) String() string {
	return fmt.Sprintf("wakes %.0f, p50 %.0f ms, p99 %.0f ms, max %.0f ms, gateway CPU %.0f µs/caller (medians of %d rounds)",
		median(s.wakes), median(s.p50), median(s.p99), median(s.max), median(s.cpu), len(s.p99))
}

// runCold measures stampedes on cold homes: -cold-callers at once on one
// home (rounds), then spread over -cold-homes homes with each wake cap.
func runCold(ctx context.Context, o options, t *table) error {
	caps := []int{}
	for _, s := range strings.Split(o.caps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-caps: want wake caps such as 16,128, got %q", o.caps)
		}
		caps = append(caps, n)
	}
	for i, c := range caps {
		g, err := coldGateway(ctx, o, c)
		if err != nil {
			return err
		}
		err = coldRuns(ctx, o, t, g, c, i == 0)
		g.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// coldGateway starts a gateway with the wake cap and -cold-homes exec
// demo homes registered through the admin API, none woken.
func coldGateway(ctx context.Context, o options, wakeCap int) (*gw, error) {
	g, err := newGateway(o, fmt.Sprintf("cold%d", wakeCap), 0, nil,
		fmt.Sprintf("wake: {idle_timeout: 0s, ready_timeout: 60s, wake_timeout: 120s, max_concurrent: %d}", wakeCap))
	if err != nil {
		return nil, err
	}
	// Each stampede comes from -cold-callers new connections at once.
	g.client.Transport.(*http.Transport).MaxIdleConnsPerHost = o.coldCallers
	if _, err := g.start(ctx, o.dir); err != nil {
		return nil, err
	}
	body := []byte(`{"provider":"exec","idle_timeout":"0s"}`)
	err = parallel(ctx, o.coldHomes, 4, func(i int) error {
		code, b, err := g.adminDo(ctx, http.MethodPut, fmt.Sprintf("/admin/homes/c%05d", i), body)
		if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
			return fmt.Errorf("register c%05d: %d %v %s", i, code, err, b)
		}
		return nil
	})
	if err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// coldRuns runs the stampedes on g: on one home (only when one is true,
// with the first cap) and spread.
func coldRuns(ctx context.Context, o options, t *table, g *gw, wakeCap int, one bool) error {
	if one {
		var cold, warm stats
		fl := floor{o: o}
		for r := range o.coldRounds {
			res, err := stampede(ctx, g, o.coldCallers, 1)
			if err != nil {
				return err
			}
			if res.failed > 0 {
				return fmt.Errorf("one-home stampede: %d of %d failed, first: %s", res.failed, o.coldCallers, res.first)
			}
			cold.add(res)
			// The same stampede on the home now awake: what the burst
			// costs without the wake.
			wres, err := stampede(ctx, g, o.coldCallers, 1)
			if err != nil {
				return err
			}
			warm.add(wres)
			logf("one-home stampede %d: wakes %.0f p50 %.0f ms p99 %.0f ms max %.0f ms; warm: p99 %.0f ms",
				r+1, res.wakes, res.p50, res.p99, res.max, wres.p99)
			// The same stampede without wakegate (coldfloor.go).
			if err := fl.measure(ctx, g, r); err != nil {
				return err
			}
			if err := suspendAll(ctx, g, 1); err != nil {
				return err
			}
		}
		t.add(fmt.Sprintf("cold, %d callers on one home (boot %s)", o.coldCallers, o.boot), "%s", cold.String())
		t.add(fmt.Sprintf("warm, the same %d callers on that home awake", o.coldCallers), "%s", warm.String())
		fl.rows(t)
	}
	res, err := stampede(ctx, g, o.coldCallers, o.coldHomes)
	if err != nil {
		return err
	}
	t.add(fmt.Sprintf("cold, %d callers over %d homes, wake cap %d", o.coldCallers, o.coldHomes, wakeCap),
		"wakes %.0f, p50 %.0f ms, p99 %.0f ms, max %.0f ms, gateway CPU %.0f µs/caller, %d failed %s", res.wakes, res.p50, res.p99, res.max, res.cpuPer, res.failed, res.first)
	return suspendAll(ctx, g, o.coldHomes)
}

// stampede sends callers requests at once, each on a new connection, to
// homes c00000.. in turn through g, and reports the wakes the gateway
// counted and its CPU per caller.
func stampede(ctx context.Context, g *gw, callers, homes int) (coldResult, error) {
	m0, err := g.metrics(ctx)
	if err != nil {
		return coldResult{}, err
	}
	cpu0, err := g.cpu()
	if err != nil {
		return coldResult{}, err
	}
	res := burst(callers, func(i int) string { return fmt.Sprintf("http://%s/node/c%05d/whoami", g.addr, i%homes) })
	cpu1, err := g.cpu()
	if err != nil {
		return coldResult{}, err
	}
	res.cpuPer = float64((cpu1 - cpu0).Microseconds()) / float64(callers)
	m1, err := g.metrics(ctx)
	if err != nil {
		return coldResult{}, err
	}
	res.wakes = m1["wakegate_wakes_total"] - m0["wakegate_wakes_total"]
	return res, nil
}

// burst sends callers GET requests at once, each on a new connection, to
// url(i), and returns the latency percentiles and failures.
func burst(callers int, url func(i int) string) coldResult {
	lat := make([]float64, callers)
	var mu sync.Mutex
	var res coldResult
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		u := url(i)
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
			<-start
			t0 := time.Now()
			r, err := c.Get(u)
			if err == nil {
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
				if r.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %d", r.StatusCode)
				}
			}
			lat[i] = float64(time.Since(t0).Microseconds()) / 1000
			if err != nil {
				mu.Lock()
				res.failed++
				if res.first == "" {
					res.first = err.Error()
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	return res
}

// suspendAll suspends homes c00000.. so that the next run finds them cold.
func suspendAll(ctx context.Context, g *gw, homes int) error {
	return parallel(ctx, homes, 8, func(i int) error {
		code, b, err := g.adminDo(ctx, http.MethodPost, fmt.Sprintf("/admin/homes/c%05d/suspend", i), nil)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("suspend c%05d: %d %v %s", i, code, err, b)
		}
		return nil
	})
}
