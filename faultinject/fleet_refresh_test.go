package faultinject

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestFleetRefreshDropsEverywhere: the home's process is stopped (SIGSTOP)
// behind the fleet's back while both gateways hold a warm verdict of it
// for an hour. A refresh through A finds it suspended and records it so;
// B, which has no other way to learn it (the process did not end), drops
// its verdict at once from A's announcement.
func TestFleetRefreshDropsEverywhere(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{
		admin: true,
		wake:  map[string]any{"warm_ttl": "1h", "ready_timeout": "5s"},
		extra: map[string]any{"homes": fleetTwoHomes[:1]},
	})
	a, b := gws[0], gws[1]
	c := fleetClient()
	for _, g := range gws {
		if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("warm up on %s: %v %s", g.url, err, body)
		}
	}
	if !a.warm(t, "h1") || !b.warm(t, "h1") {
		t.Fatal("the home is not warm on both gateways after a request through each")
	}
	var pids []int
	for _, g := range gws {
		pids = append(pids, testbin.HomePIDs(t, filepath.Join(g.data, "homes", "h1"))...)
	}
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	if err := syscall.Kill(-pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pids[0], syscall.SIGCONT) })
	testbin.Eventually(t, "the home's process stopped", func() bool { return testbin.ProcState(pids[0]) == 'T' })

	var body string
	testbin.Eventually(t, "a refresh through A not refused as busy", func() bool {
		var code int
		code, body = a.adminSend(t, http.MethodPost, "/admin/homes/h1/refresh", "")
		return code == http.StatusOK
	})
	if !strings.Contains(body, `"provider": "suspended"`) || !strings.Contains(body, `"after": "suspended"`) {
		t.Fatalf("refresh through A: %s", body)
	}
	testbin.Eventually(t, "B drops its verdict of the home A found suspended", func() bool { return !b.warm(t, "h1") })
	for _, g := range gws {
		noPanic(t, g.Output())
	}
}
