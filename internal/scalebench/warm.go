package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// base64URL is the admin list's cursor encoding.
func base64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// warmResult is one round of warm-path load.
type warmResult struct {
	cpuPerReq time.Duration // the gateway's CPU per request
	wallPer   time.Duration // wall time per request over all connections
	p50, p99  float64       // latency, ms
}

// warmRound sends reqs GETs over conns keep-alive connections to g, to the
// first homes static homes in turn, and measures the gateway's CPU.
func warmRound(ctx context.Context, g *gw, homes, reqs, conns int) (warmResult, error) {
	urls := make([]string, homes)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://%s/node/a%05d/", g.addr, i)
	}
	lat := make([]float64, reqs)
	var next atomic.Int64
	var failed atomic.Value
	cpu0, err := g.cpu()
	if err != nil {
		return warmResult{}, err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			for {
				i := int(next.Add(1) - 1)
				if i >= reqs || ctx.Err() != nil {
					return
				}
				s := time.Now()
				res, err := c.Get(urls[i%homes])
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed.Store(fmt.Errorf("status %d", res.StatusCode))
					return
				}
				lat[i] = float64(time.Since(s).Microseconds()) / 1000
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if err, _ := failed.Load().(error); err != nil {
		return warmResult{}, fmt.Errorf("warm load on %s: %w", g.name, err)
	}
	cpu1, err := g.cpu()
	if err != nil {
		return warmResult{}, err
	}
	return warmResult{cpuPerReq: (cpu1 - cpu0) / time.Duration(reqs), wallPer: wall / time.Duration(reqs),
		p50: percentile(lat, 50), p99: percentile(lat, 99)}, nil
}

// warmRounds alternates the three warm-path loads o.rounds times and
// reports medians: the small gateway's homes, the same number of homes on
// the large gateway, and the large gateway's awake homes all in turn.
func warmRounds(ctx context.Context, o options, t *table, small, large *gw) error {
	type load struct {
		name  string
		g     *gw
		homes int
		cpu   []float64
		wall  []float64
		p50   []float64
		p99   []float64
	}
	loads := []*load{
		{name: fmt.Sprintf("%d homes registered, %d in use", o.small, o.small), g: small, homes: o.small},
		{name: fmt.Sprintf("%d homes registered, %d in use", o.homes, o.small), g: large, homes: o.small},
		{name: fmt.Sprintf("%d homes registered, %d in use", o.homes, o.awake), g: large, homes: o.awake},
	}
	// One round of each first, unmeasured: connections and pools warm up.
	for _, l := range loads {
		if _, err := warmRound(ctx, l.g, l.homes, o.reqs/4, o.conns); err != nil {
			return err
		}
	}
	for r := range o.rounds {
		for _, l := range loads {
			res, err := warmRound(ctx, l.g, l.homes, o.reqs, o.conns)
			if err != nil {
				return err
			}
			l.cpu = append(l.cpu, float64(res.cpuPerReq.Nanoseconds())/1000)
			l.wall = append(l.wall, float64(res.wallPer.Nanoseconds())/1000)
			l.p50 = append(l.p50, res.p50)
			l.p99 = append(l.p99, res.p99)
		}
		logf("warm round %d of %d done", r+1, o.rounds)
	}
	base := median(loads[0].cpu)
	for _, l := range loads {
		c := median(l.cpu)
		t.add("warm path, "+l.name, "%.1f µs CPU/req (%.3f× the %d-home gateway), %.1f µs/req wall over %d conns, p50 %.2f ms, p99 %.2f ms",
			c, c/base, o.small, median(l.wall), o.conns, median(l.p50), median(l.p99))
	}
	return nil
}
