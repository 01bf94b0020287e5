package gateway_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// hungHome is a home that ignores SIGTERM and serves until it is asked for
// /hang, then accepts connections and never answers again: a home stopped
// in a debugger, as far as the gateway can tell.
const hungHome = `
import http.server, signal, sys, threading, time
hung = threading.Event()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/hang"):
            hung.set()
        elif hung.is_set():
            time.sleep(3600)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
s.daemon_threads = True
s.serve_forever()
`

// hungPython returns the real python3 executable (not a shim that execs
// it) and a script path running hungHome, or skips the test.
func hungPython(t *testing.T) (string, string) {
	t.Helper()
	return testbin.PythonScript(t, "hung_home.py", hungHome)
}

// TestHungHome wakes a real home, then makes it hang (it accepts
// connections, never answers and ignores SIGTERM). A request forwarded
// under the warm verdict times out waiting for the response headers (504)
// and drops the verdict. The next request's wake fails at the ready
// timeout: its caller gets 503 while the half-woken home is still being
// stopped (its process is alive, and the wake's log line, written once the
// stop has ended, is not there yet); the stop then ends, proven.
func TestHungHome(t *testing.T) {
	t.Parallel()
	py, script := hungPython(t)
	// The exec section's other fields follow the command.
	gw := e2eStartWithCommand(t, fmt.Sprintf("[%q, %q, \"{port}\"]\n  stop_grace: 8s", py, script), `
log: {access: false}
proxy:
  home_response_header_timeout: 500ms
wake:
  idle_timeout: 0s
  ready_timeout: 2s
  probe: {kind: http, attempt_timeout: 500ms}
homes:
  - id: demo
`)
	c := e2eClient(t)
	base := "http://" + gw.addr + "/node/demo"
	if res, body := e2eGet(t, c, base+"/x", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d %s", res.StatusCode, body)
	}
	if res, body := e2eGet(t, c, base+"/hang", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("hang: %d %s", res.StatusCode, body)
	}
	pid := shutdownRecordedPID(t, filepath.Join(gw.data, "homes", "demo"))
	if !gw.g.Engine().Warm("demo") {
		t.Fatal("no warm verdict before the home hung")
	}

	res, body := e2eGet(t, c, base+"/x", nil)
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "upstream_timeout") {
		t.Errorf("request to the hung home under a warm verdict: %d %s; want 504 upstream_timeout", res.StatusCode, body)
	}
	if gw.g.Engine().Warm("demo") {
		t.Error("the warm verdict outlived a forward that timed out")
	}

	res, body = e2eGet(t, c, base+"/x", nil)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("request that wakes the hung home: %d %s; want 503", res.StatusCode, body)
	}
	// The caller was released before the stop ended: the home's process
	// still runs (it ignores SIGTERM for stop_grace), and the wake's line
	// is not logged yet.
	if s := testbin.ProcState(pid); s == 0 || s == 'Z' {
		t.Errorf("home process %d gone (state %q) when the caller got its answer; want the stop still running", pid, s)
	}
	if lines := gw.logs.Lines("wake"); len(lines) > 0 && strings.Contains(lines[len(lines)-1], "outcome=failed") {
		t.Errorf("the failed wake was logged before its caller got an answer: %s", lines[len(lines)-1])
	}
	testbin.Eventually(t, "the failed wake's line with the stop's outcome", func() bool {
		lines := gw.logs.Lines("wake")
		return len(lines) > 0 && strings.Contains(lines[len(lines)-1], "outcome=failed")
	})
	lines := gw.logs.Lines("wake")
	if last := lines[len(lines)-1]; !strings.Contains(last, "stop_proven=true") {
		t.Errorf("failed wake: %s; want stop_proven=true", last)
	}
	if s := testbin.ProcState(pid); s != 0 && s != 'Z' {
		t.Errorf("home process %d still running (state %q) after the stop", pid, s)
	}
}
