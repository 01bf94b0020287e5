package faultinject

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// Gateways that start at the same instant on one Redis register the same
// config homes at once: each must take a record another created a moment
// before as created (issue 47, finding 6).

// fleetConfigs writes n fleet configs (gw-0...) for srv, not yet started.
func fleetConfigs(t *testing.T, srv *registrytest.RedisServer, n int, o fiOptions) []*fiGateway {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = srv.URL()
	}
	return fleetConfigsVia(t, urls, o)
}

// fleetConfigsVia is fleetConfigs for one gateway per Redis URL of urls
// (a relay's, to cut one gateway's link).
func fleetConfigsVia(t *testing.T, urls []string, o fiOptions) []*fiGateway {
	t.Helper()
	n := len(urls)
	gws := make([]*fiGateway, n)
	for i := range gws {
		oi := o
		oi.extra = map[string]any{}
		for k, v := range o.extra {
			oi.extra[k] = v
		}
		oi.extra["instance"] = fmt.Sprintf("gw-%d", i)
		oi.extra["redis"] = map[string]any{"url": urls[i], "prefix": "fleet"}
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("gw-%d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		gws[i] = fiWriteConfig(t, dir, fiConfig(t, oi))
	}
	return gws
}

// startTogether starts every gateway of gws at once and waits until each
// answers /readyz; it returns the index and output of the first that
// exited instead (-1 when all serve).
func startTogether(t *testing.T, gws []*fiGateway) (int, string) {
	t.Helper()
	for _, g := range gws {
		g.Proc = testbin.Start(t, g.dir, nil, "serve", "--config", g.config)
	}
	for i, g := range gws {
		if _, exited := g.awaitReady(t); exited {
			return i, g.Output()
		}
	}
	return -1, ""
}

// manyHomes is a homes: section of n exec demo homes h1..hn at /node/u1...
func manyHomes(n int) []any {
	hs := make([]any, n)
	for i := range hs {
		hs[i] = map[string]any{"id": fmt.Sprintf("h%d", i+1), "target": fmt.Sprintf("u%d", i+1)}
	}
	return hs
}

func TestFleetStartTogether(t *testing.T) {
	const rounds = 6
	for round := range rounds {
		srv := registrytest.StartRedis(t)
		gws := fleetConfigs(t, srv, 3, fiOptions{extra: map[string]any{"homes": manyHomes(8)}})
		if i, out := startTogether(t, gws); i >= 0 {
			t.Fatalf("round %d: gw-%d exited while three gateways started together on a fresh Redis:\n%s", round, i, out)
		}
		for _, g := range gws {
			g.stop(t)
		}
	}
	t.Logf("%d rounds of three gateways started together on a fresh Redis: all served", rounds)
}
