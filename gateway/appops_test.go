package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// opsSecondTime is a home that does not listen the first time it runs (it
// sleeps), and serves 200 at every path from its second run on.
const opsSecondTime = `import http.server, os, sys, time
port, marker = int(sys.argv[1]), sys.argv[2]
if not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(600)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
`

// opsErr is the code of an admin error body ("" for an app view).
func opsErr(t *testing.T, body []byte) string {
	t.Helper()
	var e admErr
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// TestAppStartEndsOnWakeOutcome: `app start` of an app whose home never
// listens ends when the wake fails (ready_timeout 2s), saying so, instead
// of waiting for its whole budget and answering with the app still
// starting; and the operator's next start is a fresh attempt, neither held
// by the failure backoff nor refused for the failed wake, and it succeeds
// once the home listens.
func TestAppStartEndsOnWakeOutcome(t *testing.T) {
	t.Parallel()
	py, script := testbin.PythonScript(t, "second_time.py", opsSecondTime)
	// The home's own user writes the marker.
	markerDir := testbin.OpenDir(t)
	if err := os.Chmod(markerDir, 0o1777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(markerDir, "ran-once")
	a := admStart(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 2s
  failure_backoff: 1m
homes:
  - id: flaky
    command: [%q, %q, "{port}", %q]
    probe: {kind: http, path: /}
apps:
  - slug: flaky
    home: flaky
`, py, script, marker), "")

	code, _, body := a.do(t, "POST", "/admin/apps/flaky/start?wait=20s", admToken, nil, nil)
	if c := opsErr(t, body); code == http.StatusGatewayTimeout || (c != "wake_failed" && c != "wake_timeout") {
		t.Fatalf("start of a home that never listens: %d %s; want the wake's failure, not the wait's end", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/apps/flaky/start?wait=20s", admToken, nil, nil)
	if v := admDecode[admAppView](t, body); code != http.StatusOK || v.Phase != "ready" {
		t.Fatalf("the operator's second start: %d %s; want a fresh attempt that gets the app ready", code, body)
	}
}

// TestAppOperationsOneAtATime: while a start of an app is waiting for it
// to be ready, a stop of the same app waits for the start to end instead
// of overwriting its desired state; its own deadline, counted from its
// call, ends that wait (504), and the start is left as it was.
func TestAppOperationsOneAtATime(t *testing.T) {
	t.Parallel()
	up := asUpstream(t)
	a := admStart(t, fmt.Sprintf(admOps, up), "")
	started := make(chan []byte, 1)
	go func() {
		_, _, body := a.do(t, "POST", "/admin/apps/stuck/start?wait=6s", admToken, nil, nil)
		started <- body
	}()
	testbin.Eventually(t, "the start waiting for the stuck app", func() bool {
		_, _, body := a.do(t, "GET", "/admin/apps/stuck", admToken, nil, nil)
		return admDecode[admAppView](t, body).Operation == "start.waitReady"
	})
	code, _, body := a.do(t, "POST", "/admin/apps/stuck/stop?wait=1s", admToken, nil, nil)
	if code != http.StatusGatewayTimeout {
		t.Errorf("a stop during a start: %d %s; want 504 once its own second ran out", code, body)
	}
	_, _, body = a.do(t, "GET", "/admin/apps/stuck", admToken, nil, nil)
	if v := admDecode[admAppView](t, body); v.Operation != "start.waitReady" || v.Phase == "stopped" {
		t.Errorf("after the refused stop the app is %s", body)
	}
	<-started
}
