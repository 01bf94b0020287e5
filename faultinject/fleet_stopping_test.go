package faultinject

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A suspend is a fleet-wide handshake (DESIGN rule 33): a gateway that
// decides a home is idle marks it stopping and asks the fleet before it
// stops the process. A request in flight on another gateway keeps the
// home up; a request that meets the stopping home waits for the next wake.
// No request gets a 502 because another gateway stopped its home.
// slowPython is a home that answers every GET with 200, after 1.5s for a
// path that contains "slow". Given a second argument, it appends a line to
// that file as each slow request arrives.
const slowPython = `
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if "slow" in self.path:
            if len(sys.argv) > 2:
                with open(sys.argv[2], "a") as f:
                    f.write("slow\n")
            time.sleep(1.5)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *a):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

func TestFleetIdleSuspendSparesRequestsOnOtherGateways(t *testing.T) {
	python, script := testbin.PythonScript(t, "slow.py", slowPython)
	srv := registrytest.StartRedis(t)
	// A plain python server, which dies at once on SIGTERM (the demo home
	// would drain its requests first and hide a stop under them).
	gws := fleetStart(t, srv, 2, fiOptions{admin: true,
		exec: map[string]any{"command": []string{python, script, "{port}"}},
		home: map[string]any{"probe": "http"},
		wake: map[string]any{"idle_timeout": "2s", "retry_after": "1s",
			"probe": map[string]any{"kind": "http", "path": "/"}}})
	c := fleetClient()
	mustGet(t, gws[0], c) // gw-0 runs the home and decides when it is idle
	store := openFleetStore(t, srv)
	statuses := map[int]int{}
	var bad []string
	seen := 0
	for i := range 25 {
		// Sent the moment gw-1's heartbeat says it has no session: a
		// decision made from that report would stop the home under it.
		testbin.Eventually(t, "gw-1 reports no session", func() bool {
			n, err := store.FleetSessions(context.Background(), fiHome)
			return err == nil && n == 0
		})
		res, body, err := gws[1].get(c, "/node/"+fiTarget+"/slow")
		if err != nil {
			t.Fatalf("request %d through gw-1: %v", i, err)
		}
		statuses[res.StatusCode]++
		if res.StatusCode != http.StatusOK {
			bad = append(bad, res.Status+" "+strings.TrimSpace(body))
		}
		if n := strings.Count(gws[0].Output(), "msg=suspend "); n > seen {
			// gw-0 suspended the home: a request through it makes it see
			// the home running again, so that it decides idle once more.
			seen = n
			mustGet(t, gws[0], c)
		}
	}
	suspends := strings.Count(gws[0].Output(), "msg=suspend ")
	backoffs := strings.Count(gws[0].Output(), "suspend backed off")
	if len(bad) > 0 {
		t.Fatalf("statuses %v through gw-1 while gw-0 made idle decisions (%d suspends): %v\ngw-0:\n%s\ngw-1:\n%s",
			statuses, suspends, bad, gws[0].Output(), gws[1].Output())
	}
	t.Logf("25 requests of 1.5s through gw-1, each sent when its report said no session, while gw-0 decided idle: statuses %v; %d suspends, %d backed off",
		statuses, suspends, backoffs)
}

// slowHomeOptions is a fleet with the slow python home, woken by HTTP
// probes, never suspended for idleness; roll adds a roll section. The
// home notes each slow request's arrival in arrived.
func slowHomeOptions(t *testing.T, roll map[string]any) (o fiOptions, arrived *slowArrivals) {
	python, script := testbin.PythonScript(t, "slow.py", slowPython)
	// Written by the home's own user under a root gateway.
	arrived = &slowArrivals{path: filepath.Join(testbin.OpenDir(t), "arrived")}
	if err := os.WriteFile(arrived.path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(arrived.path, 0o666); err != nil {
		t.Fatal(err)
	}
	o = fiOptions{admin: true,
		exec: map[string]any{"command": []string{python, script, "{port}", arrived.path}},
		home: map[string]any{"probe": "http", "version": "1"},
		wake: map[string]any{"idle_timeout": "0s", "retry_after": "1s",
			"probe": map[string]any{"kind": "http", "path": "/"}}}
	if roll != nil {
		o.extra = map[string]any{"roll": roll}
	}
	return o, arrived
}

// slowArrivals is the file the slow home notes its slow requests in.
type slowArrivals struct{ path string }

// count returns how many slow requests reached the home.
func (a *slowArrivals) count() int {
	b, _ := os.ReadFile(a.path)
	return bytes.Count(b, []byte("\n"))
}

// slowAt sends a slow request through g, as slowThrough does, and returns
// once the home has it.
func (a *slowArrivals) slowAt(t *testing.T, g *fiGateway) <-chan string {
	t.Helper()
	n := a.count()
	done := slowThrough(g)
	testbin.Eventually(t, "the slow request to reach the home", func() bool { return a.count() > n })
	return done
}

// slowThrough sends a slow request through g and returns its outcome on
// the channel, once.
func slowThrough(g *fiGateway) <-chan string {
	out := make(chan string, 1)
	go func() {
		c := fleetClient()
		c.Timeout = 20 * time.Second
		res, body, err := g.get(c, "/node/"+fiTarget+"/slow")
		switch {
		case err != nil:
			out <- err.Error()
		case res.StatusCode != http.StatusOK:
			out <- res.Status + " " + strings.TrimSpace(body)
		default:
			out <- ""
		}
	}()
	return out
}

// A roll replaces the home's process: the fleet's handshake comes before
// the recreate, so a request in flight through another gateway, which its
// session report does not show yet, keeps the home on its version.
func TestFleetRollSparesRequestsOnOtherGateways(t *testing.T) {
	srv := registrytest.StartRedis(t)
	o, arrived := slowHomeOptions(t, map[string]any{"mode": "lazy"})
	gws := fleetStart(t, srv, 2, o)
	c := fleetClient()
	mustGet(t, gws[0], c)
	mustGet(t, gws[1], c)
	store := openFleetStore(t, srv)
	var bad []string
	refused := 0
	for v := 2; v <= 6; v++ {
		testbin.Eventually(t, "gw-1 reports no session", func() bool {
			n, err := store.FleetSessions(context.Background(), fiHome)
			return err == nil && n == 0
		})
		gws[0].mustAdmin(t, http.MethodPut, "/admin/target", fmt.Sprintf(`{"version":"%d"}`, v), http.StatusOK, http.StatusCreated)
		done := arrived.slowAt(t, gws[1]) // gw-1's report does not show it yet
		code, body := gws[0].adminSend(t, http.MethodPost, "/admin/homes/"+fiHome+"/roll", "")
		if code == http.StatusConflict {
			refused++
		}
		if msg := <-done; msg != "" {
			bad = append(bad, fmt.Sprintf("target %d (roll answered %d %s): %s", v, code, strings.TrimSpace(body), msg))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("slow requests through gw-1 cut by rolls through gw-0: %v\ngw-0:\n%s", bad, gws[0].Output())
	}
	if refused == 0 {
		t.Fatalf("no roll was refused while gw-1 served a request: the handshake never met one\ngw-0:\n%s", gws[0].Output())
	}
	t.Logf("5 rolls through gw-0 while gw-1 served a 1.5 s request: %d refused as busy, every request answered 200", refused)
}

// A gateway's shutdown in a fleet stops its homes (DESIGN rule 20) only
// after the fleet's handshake: a home another gateway still serves is
// handed over running, and that gateway's request completes and the next
// ones are served by the same process.
func TestFleetShutdownHandsOverAHomeInUse(t *testing.T) {
	srv := registrytest.StartRedis(t)
	o, arrived := slowHomeOptions(t, nil)
	gws := fleetStart(t, srv, 2, o)
	c := fleetClient()
	mustGet(t, gws[0], c) // gw-0 runs the home
	mustGet(t, gws[1], c)
	before := countIn(homeDirs(gws))
	if len(before) != 1 {
		t.Fatalf("home processes %v, want one", before)
	}
	done := arrived.slowAt(t, gws[1])
	gws[0].stop(t)
	if msg := <-done; msg != "" {
		t.Fatalf("a request through gw-1 was cut by gw-0's shutdown: %s\ngw-0:\n%s", msg, gws[0].Output())
	}
	if !strings.Contains(gws[0].Output(), "hands a home in use elsewhere over") {
		t.Fatalf("gw-0 did not hand the home over:\n%s", gws[0].Output())
	}
	mustGet(t, gws[1], c)
	store := openFleetStore(t, srv)
	testbin.Eventually(t, "gw-1 runs the home", func() bool {
		h, err := store.GetHome(context.Background(), fiHome)
		return err == nil && h.Runner == "gw-1"
	})
	if after := countIn(homeDirs(gws)); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("home processes %v after the hand-over, want the same one %v", after, before)
	}
	// With nobody else on it, a shutdown stops the home under its lock.
	gws[1].stop(t)
	testbin.Eventually(t, "no home process left", func() bool { return len(countIn(homeDirs(gws))) == 0 })
}
