package faultinject

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A runner acts on a home's process only while it holds the home (DESIGN
// rule 32, issue 47 finding 1): a runner paused past its heartbeat, whose
// home another gateway took over, never answers the exit of that process
// with a start of its own.

// heartbeatTTL is a gateway's heartbeat TTL with the default idle tick
// (1s): three ticks and a second of slack.
const heartbeatTTL = 4 * time.Second

// waitRunner drives requests for the home through g until the record names
// runner, or fails t after limit.
func waitRunner(t *testing.T, store *redis.Store, g *fiGateway, runner string, limit time.Duration) time.Duration {
	t.Helper()
	c := fleetClient()
	c.Timeout = 5 * time.Second
	t0 := time.Now()
	if !testbin.Poll(limit, 200*time.Millisecond, func() bool {
		if res, _, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
			return false
		}
		h, err := store.GetHome(context.Background(), fiHome)
		return err == nil && h.Runner == runner
	}) {
		t.Fatalf("the record did not name %s as the runner within %s", runner, limit)
	}
	return time.Since(t0)
}

// suspendThrough asks g's admin API to suspend the home once no gateway
// reports a session on it.
func suspendThrough(t *testing.T, store *redis.Store, g *fiGateway) {
	t.Helper()
	testbin.Eventually(t, "no session reported", func() bool {
		n, err := store.FleetSessions(context.Background(), fiHome)
		return err == nil && n == 0
	})
	code, body := g.adminSend(t, http.MethodPost, "/admin/homes/"+fiHome+"/suspend", "")
	if code/100 != 2 {
		t.Fatalf("suspend: %d %s", code, body)
	}
}

// settlesAtZero fails t unless the home's processes reach zero within
// limit and stay there for hold, sampled every 20 ms.
func settlesAtZero(t *testing.T, gws []*fiGateway, limit, hold time.Duration) {
	t.Helper()
	if !testbin.Poll(limit, sampleEvery, func() bool { return len(countIn(homeDirs(gws))) == 0 }) {
		t.Fatalf("home processes %v %s after the suspend, want none", countIn(homeDirs(gws)), limit)
	}
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(sampleEvery) {
		if pids := countIn(homeDirs(gws)); len(pids) != 0 {
			t.Fatalf("home processes %v after the suspend had left none: a gateway started the home again", pids)
		}
	}
}

// homeDirs lists the home's working directory under each gateway.
func homeDirs(gws []*fiGateway) []string {
	var ds []string
	for _, g := range gws {
		ds = append(ds, g.homeDir(fiHome))
	}
	return ds
}

// pause stops g with SIGSTOP; the returned function resumes it (and is
// also run when the test ends, so a failed test leaves no stopped
// gateway).
func pause(t *testing.T, g *fiGateway) func() {
	t.Helper()
	if err := g.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = g.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

func TestFleetPausedRunnerDoesNotRestart(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	store := openFleetStore(t, srv)
	mustGet(t, gws[0], fleetClient())
	samp := sampleHome(gws, fiHome)
	defer samp.stop()

	resume := pause(t, gws[0])
	paused := time.Now()
	took := waitRunner(t, store, gws[1], "gw-1", 5*heartbeatTTL)
	if rest := 5*heartbeatTTL/2 - time.Since(paused); rest > 0 {
		time.Sleep(rest) // paused for 2.5 TTLs in all
	}
	resume()
	suspendThrough(t, store, gws[2])
	settlesAtZero(t, gws, 5*time.Second, 5*time.Second)
	h, err := store.GetHome(context.Background(), fiHome)
	if err != nil || h.Status != registry.StatusSuspended || h.Runner != "" {
		t.Fatalf("record %+v (%v), want suspended with no runner", h, err)
	}
	if strings.Contains(gws[0].Output(), "home exited unexpectedly; restarting") {
		t.Fatalf("gw-0, paused past its heartbeat, restarted the home another gateway had stopped:\n%s", gws[0].Output())
	}
	samp.stop()
	n, most, two, _ := samp.report()
	if most > 1 {
		t.Fatalf("two processes of the home at once: %v", two)
	}
	t.Logf("runner paused %s (TTL %s): gw-1 took over after %s; after the suspend through gw-2, 0 processes; %d samples, at most %d process",
		(5 * heartbeatTTL / 2).Round(time.Second), heartbeatTTL, took.Round(100*time.Millisecond), n, most)
}

func TestFleetCutOffRunnerDoesNotRestart(t *testing.T) {
	srv := registrytest.StartRedis(t)
	relay := startRelay(t, srv.Addr())
	urls := []string{"redis://" + relay.addr() + "/0", srv.URL(), srv.URL()}
	gws := fleetConfigsVia(t, urls, fiOptions{admin: true,
		wake: map[string]any{"idle_timeout": "0s", "warm_ttl": "1s", "retry_after": "1s"}})
	for _, g := range gws {
		g.start(t)
	}
	store := openFleetStore(t, srv)
	c := fleetClient()
	mustGet(t, gws[0], c)
	samp := sampleHome(gws, fiHome)
	defer samp.stop()

	relay.freeze()
	t.Cleanup(relay.heal)
	took := waitRunner(t, store, gws[1], "gw-1", 5*heartbeatTTL)
	suspendThrough(t, store, gws[1])
	settlesAtZero(t, gws, 5*time.Second, 2*time.Second)
	relay.heal()
	healed := time.Now()
	// Requests through both after the link healed: one process at most,
	// and the cut-off gateway never starts a copy of its own.
	for time.Since(healed) < 2*heartbeatTTL {
		for _, g := range gws[:2] {
			res, _, err := g.get(c, fiWhoami)
			if err == nil && res.StatusCode/100 == 5 && res.Header.Get("Retry-After") == "" {
				t.Fatalf("%s answered %d without Retry-After", g.url, res.StatusCode)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	samp.stop()
	n, most, two, last := samp.report()
	if most > 1 {
		t.Fatalf("two processes of the home at once: %v", two)
	}
	if last != 1 {
		t.Fatalf("%d processes of the home once requests came through both gateways, want 1", last)
	}
	t.Logf("gw-0's link to Redis frozen: gw-1 took over after %s; suspend, heal, requests through both: %d samples, at most %d process",
		took.Round(100*time.Millisecond), n, most)
}

// A runner paused past its heartbeat, whose home another gateway took
// over, that then shuts down leaves the home's process to the new runner:
// its quiesce stops only what it still holds.
func TestFleetDemotedRunnerShutdownLeavesTheHome(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	store := openFleetStore(t, srv)
	mustGet(t, gws[0], fleetClient())
	before := countIn(homeDirs(gws))
	if len(before) != 1 {
		t.Fatalf("home processes %v, want one", before)
	}
	resume := pause(t, gws[0])
	waitRunner(t, store, gws[1], "gw-1", 5*heartbeatTTL)
	resume()
	gws[0].stop(t)
	after := countIn(homeDirs(gws))
	if len(after) != 1 || after[0] != before[0] {
		t.Fatalf("home processes %v after the demoted runner shut down, want the one gw-1 runs (%v)", after, before)
	}
	mustGet(t, gws[1], fleetClient())
	mustGet(t, gws[2], fleetClient())
	t.Logf("gw-0 paused, gw-1 took over pid %d; gw-0 shut down and left it running", before[0])
}
