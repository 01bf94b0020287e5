package faultinject

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A suspend is a fleet-wide handshake (DESIGN rule 33): a gateway that
// decides a home is idle marks it stopping and asks the fleet before it
// stops the process. A request in flight on another gateway keeps the
// home up; a request that meets the stopping home waits for the next wake.
// No request gets a 502 because another gateway stopped its home.
// slowPython is a home that answers every GET with 200, after 1.5s for a
// path that contains "slow".
const slowPython = `
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if "slow" in self.path:
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
