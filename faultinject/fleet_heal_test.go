package faultinject

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestFleetRedisRestartedEmpty kills the fleet's Redis, which keeps nothing
// across a restart, and starts it again empty: every home of the config is
// served again through every gateway within 10s of Redis answering, with no
// gateway restarted and one process per home; the home registered through
// the admin API is named as lost, and its process stopped; the status says what a restart of this
// Redis loses.
func TestFleetRedisRestartedEmpty(t *testing.T) {
	srv := registrytest.StartVolatileRedis(t)
	gws := fleetStart(t, srv, 3, fiOptions{admin: true,
		wake:  map[string]any{"warm_ttl": "1s", "retry_after": "1s"},
		extra: map[string]any{"homes": fleetTwoHomes}})
	c := fleetClient()
	gws[0].mustAdmin(t, http.MethodPut, "/admin/homes/h9", `{"target":"zed"}`, http.StatusCreated)
	for _, g := range gws {
		testbin.Eventually(t, "the admin-registered home is served everywhere", func() bool {
			res, _, err := g.get(c, "/node/zed/whoami")
			return err == nil && res.StatusCode == http.StatusOK
		})
		mustGet(t, g, c) // h1 runs (on gw-0); h2 sleeps
	}
	for _, g := range gws {
		code, body := g.adminSend(t, http.MethodGet, "/admin/status", "")
		var st admin.Status
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil ||
			!strings.Contains(strings.Join(st.Warnings, "\n"), "keeps nothing across its own restart") {
			t.Fatalf("status of %s: %d %s, want a warning that Redis keeps nothing across a restart", g.url, code, body)
		}
	}

	srv.Kill()
	time.Sleep(3 * time.Second)
	srv.Restart()
	up := time.Now()
	type route struct{ gw, path string }
	served := map[route]time.Duration{}
	statuses, codes := map[int]int{}, map[string]int{}
	testbin.Poll(20*time.Second-time.Since(up), 100*time.Millisecond, func() bool {
		for i, g := range gws {
			for _, p := range []string{fiWhoami, "/node/bob/whoami"} {
				r := route{fmt.Sprintf("gw-%d", i), p}
				if _, ok := served[r]; ok {
					continue
				}
				res, body, err := g.get(c, p)
				if err != nil {
					t.Fatalf("GET %s through gw-%d after Redis came back: %v", p, i, err)
				}
				statuses[res.StatusCode]++
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				if res.StatusCode != http.StatusOK && json.Unmarshal([]byte(body), &e) == nil {
					codes[e.Error.Code]++
				}
				if res.StatusCode == http.StatusOK {
					served[r] = time.Since(up)
				}
			}
		}
		return len(served) == 2*len(gws)
	})
	var worst time.Duration
	for _, d := range served {
		worst = max(worst, d)
	}
	if len(served) < 2*len(gws) || worst > 10*time.Second {
		t.Fatalf("after Redis came back empty, served %v (want every home through every gateway within 10s); statuses %v, codes %v",
			served, statuses, codes)
	}
	for _, id := range []string{"h1", "h2"} {
		if pids := fleetHomePIDs(t, gws, id); len(pids) != 1 {
			t.Fatalf("processes of %s after the heal: %v, want one", id, pids)
		}
	}
	named := false
	for _, g := range gws {
		if strings.Contains(g.Output(), "lost what was registered through the admin API: homes h9") {
			named = true
		}
	}
	if !named {
		t.Fatalf("no gateway named the lost admin-registered home h9:\n%s", gws[0].Output())
	}
	// Its process is stopped by the gateway that ran it: no record is
	// left to say who runs it.
	testbin.Eventually(t, "the lost admin-registered home's process stopped", func() bool {
		return len(fleetHomePIDs(t, gws, "h9")) == 0
	})
	t.Logf("Redis restarted empty: every config home served through every gateway %s after Redis answered "+
		"(statuses meanwhile %v, codes %v); one process per home; h9 reported lost and its process stopped", worst.Round(100*time.Millisecond), statuses, codes)
}
