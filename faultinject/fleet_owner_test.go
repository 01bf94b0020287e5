package faultinject

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// Ownership of machine-local homes (DESIGN rule 28): three gateways, each
// with a data_dir of its own, on one Redis. A home's process is run by one
// of them; the others forward to it and never restart it as a crash.

// ownerFleet starts three gateways with an admin listener, the demo home
// suspended after idle of no request, and a short warm TTL so that requests
// go through the engine again.
func ownerFleet(t *testing.T, srv *registrytest.RedisServer, idle string) []*fiGateway {
	t.Helper()
	return fleetStart(t, srv, 3, fiOptions{admin: true,
		wake: map[string]any{"idle_timeout": idle, "warm_ttl": "1s", "retry_after": "1s"}})
}

// mustGet sends GET fiWhoami through g and fails t unless it answers 200.
func mustGet(t *testing.T, g *fiGateway, c *http.Client) {
	t.Helper()
	res, body, err := g.get(c, fiWhoami)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s through %s: %v %s", fiWhoami, g.url, err, body)
	}
}

// noRestartAsCrash fails t when a gateway restarted a home whose stop it
// took for a crash.
func noRestartAsCrash(t *testing.T, gws []*fiGateway) {
	t.Helper()
	for i, g := range gws {
		if strings.Contains(g.Output(), "home exited unexpectedly") {
			t.Fatalf("gw-%d took a stop for a crash and restarted the home:\n%s", i, g.Output())
		}
	}
}

// staysAt fails t unless the fleet runs exactly n processes of the home at
// every look during d.
func staysAt(t *testing.T, gws []*fiGateway, n int, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != n {
			t.Fatalf("home processes %v across the fleet, want %d", pids, n)
		}
	}
}

func TestFleetIdleSuspendLeavesNoCopies(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "3s")
	c := fleetClient()
	for _, g := range gws {
		mustGet(t, g, c)
		if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 1 {
			t.Fatalf("home processes %v while the fleet serves, want one", pids)
		}
	}
	store := openFleetStore(t, srv)
	runner := ""
	if h, err := store.GetHome(context.Background(), fiHome); err == nil {
		runner = h.Runner
	}
	t0 := time.Now()
	testbin.Eventually(t, "the idle home suspended", func() bool { return len(fleetHomePIDs(t, gws, fiHome)) == 0 })
	gone := time.Since(t0)
	// Several idle ticks of every gateway after the suspend: nothing comes
	// back.
	staysAt(t, gws, 0, 4*time.Second)
	noRestartAsCrash(t, gws)
	if runner != "gw-0" {
		t.Fatalf("the record named runner %q while the fleet served, want gw-0: the gateway that started the process", runner)
	}
	h, err := store.GetHome(context.Background(), fiHome)
	if err != nil || h.Status != registry.StatusSuspended || h.WantRunning || h.Runner != "" {
		t.Fatalf("record %+v (%v), want suspended, not wanted, no runner", h, err)
	}
	t.Logf("one process while three gateways served; 0 processes %s after the last request, and 0 for 4s after", gone.Round(100*time.Millisecond))
}

func TestFleetSuspendThroughNonOwner(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	c := fleetClient()
	for _, g := range gws {
		mustGet(t, g, c)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 1 {
		t.Fatalf("home processes %v while the fleet serves, want one", pids)
	}
	// A request still in flight at a gateway's last heartbeat counts as a
	// session until its next one: the suspend waits for none.
	store := openFleetStore(t, srv)
	testbin.Eventually(t, "no session reported", func() bool {
		n, err := store.FleetSessions(context.Background(), fiHome)
		return err == nil && n == 0
	})
	code, body := gws[1].adminSend(t, http.MethodPost, "/admin/homes/"+fiHome+"/suspend", "")
	if code/100 != 2 {
		t.Fatalf("suspend through gw-1, which does not run the home: %d %s", code, body)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 0 {
		t.Fatalf("home processes %v once the suspend answered, want none", pids)
	}
	staysAt(t, gws, 0, 3*time.Second)
	noRestartAsCrash(t, gws)
	// The next request, through another non-owner, starts one process.
	mustGet(t, gws[2], c)
	staysAt(t, gws, 1, time.Second)
	t.Logf("suspend through gw-1 answered %d; 0 processes after, 1 after the next request through gw-2", code)
}

func TestFleetOwnerShutdownIsNoCrash(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	c := fleetClient()
	for _, g := range gws {
		mustGet(t, g, c)
	}
	gws[0].stop(t) // quiesces the home it runs
	rest := gws[1:]
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 0 {
		t.Fatalf("home processes %v after its runner shut down, want none", pids)
	}
	staysAt(t, gws, 0, 3*time.Second)
	noRestartAsCrash(t, rest)
	t0 := time.Now()
	mustGet(t, gws[1], c)
	t1 := time.Now()
	mustGet(t, gws[2], c)
	t2 := time.Now()
	staysAt(t, gws, 1, time.Second)
	t.Logf("runner shut down: 0 processes for 3s, no restart as a crash; the next request through gw-1 served in %s, "+
		"then through gw-2 in %s, with one process", t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond))
}

func TestFleetOwnerKilledIsTakenOver(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	c := fleetClient()
	for _, g := range gws {
		mustGet(t, g, c)
	}
	before := fleetHomePIDs(t, gws, fiHome)
	if len(before) != 1 {
		t.Fatalf("home processes %v, want one", before)
	}
	store := openFleetStore(t, srv)
	gws[0].kill(t)
	killed := time.Now()
	statuses := map[int]int{}
	var took time.Duration
	// Requests alternate between the two survivors until one takes the
	// home over, and for 2s after.
	i := 0
	testbin.Poll(15*time.Second, 50*time.Millisecond, func() bool {
		g := gws[1+i%2]
		i++
		res, _, err := g.get(c, fiWhoami)
		if err != nil {
			t.Fatalf("request through %s after the runner died: %v", g.url, err)
		}
		statuses[res.StatusCode]++
		if pids := fleetHomePIDs(t, gws, fiHome); len(pids) > 1 {
			t.Fatalf("home processes %v after the runner died: two at once", pids)
		}
		if took == 0 {
			if h, err := store.GetHome(context.Background(), fiHome); err == nil && h.Runner != "" && h.Runner != "gw-0" {
				took = time.Since(killed)
			}
		}
		return took != 0 && time.Since(killed) > took+2*time.Second
	})
	if took == 0 {
		t.Fatalf("no gateway took the home over within 15s of its runner's death; statuses %v", statuses)
	}
	if statuses[http.StatusOK] == 0 || len(statuses) != 1 {
		t.Fatalf("statuses after the runner died: %v, want only 200", statuses)
	}
	after := fleetHomePIDs(t, gws, fiHome)
	if len(after) != 1 || after[0] != before[0] {
		t.Fatalf("home processes %v after the takeover, want the one that ran (%v), adopted", after, before)
	}
	noRestartAsCrash(t, gws[1:])
	// The adopter keeps the process's record and log in its own data_dir,
	// which it never started the home in (issue 47, finding 7).
	for i, g := range gws[1:] {
		if strings.Contains(g.Output(), "no such file or directory") {
			t.Fatalf("gw-%d, adopting the home, could not write its own files of it:\n%s", i+1, g.Output())
		}
	}
	t.Logf("runner SIGKILLed: taken over after %s; statuses %v; one process throughout (pid %d kept)",
		took.Round(100*time.Millisecond), statuses, after[0])
}

// TestFleetRunnerOnAnotherMachine records that the home's runner runs on
// another machine: a gateway here must not look for the runner's loopback
// endpoint on its own machine, nor start a copy; it answers 503
// home_elsewhere with Retry-After.
func TestFleetRunnerOnAnotherMachine(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := ownerFleet(t, srv, "0s")
	c := fleetClient()
	mustGet(t, gws[0], c)
	store := openFleetStore(t, srv)
	ctx := context.Background()
	if _, err := registry.UpdateHome(ctx, store, registry.Home{ID: fiHome}, "test", func(h *registry.Home) {
		h.RunnerMachine = "elsewhere/00000000-0000-0000-0000-000000000000"
	}); err != nil {
		t.Fatal(err)
	}
	res, body, err := gws[1].get(c, fiWhoami)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "home_elsewhere") {
		t.Fatalf("request through gw-1 for a home run on another machine: %v %d %s, want 503 home_elsewhere", err, res.StatusCode, body)
	}
	if strings.Contains(body, "gw-0") || strings.Contains(body, "127.0.0.1") {
		t.Fatalf("the public body names the runner or its endpoint: %s", body)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 1 {
		t.Fatalf("home processes %v, want the runner's one only", pids)
	}
	mustGet(t, gws[0], c) // the runner itself serves it
}
