package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// gatedPyHome serves HTTP on the socket it was handed as descriptor 3.
// Its readiness path answers 503 until the file argv[1] exists; every
// other path answers 200 at once.
const gatedPyHome = `import http.server, os, socket, sys

gate = sys.argv[1]

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = 200
        if self.path.endswith("/ready") and not os.path.exists(gate):
            code = 503
        body = b"served"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.serve_forever()
`

// An API caller of a socket-activated home is forwarded as soon as the
// home's process is started, before its probe passes: here the probe
// keeps failing until the caller has its answer, which it could not get
// if it waited for the verdict. The verdict still comes from the probe
// alone: the wake stays in flight until the gate opens.
func TestQueuedCallerServedBeforeProbePasses(t *testing.T) {
	python, script := testbin.PythonScript(t, "gated_home.py", gatedPyHome)
	gate := filepath.Join(t.TempDir(), "gate")
	a := admStart(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 20s
homes:
  - id: alice
    socket_activation: true
    command: [%q, %q, %q]
    probe: {kind: http, path: "/node/{target}/ready"}
`, python, script, gate), "")
	client := &http.Client{Timeout: 20 * time.Second}
	res, err := client.Get("http://" + a.addr + "/node/alice/data")
	if err != nil {
		t.Fatalf("the caller got no answer while the probe failed: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "served" {
		t.Fatalf("caller: %d %q, want 200 from the home", res.StatusCode, body)
	}
	if st := homeState(t, a, "alice"); st != "waking" {
		t.Fatalf("the home is %q while its probe still fails; want waking", st)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", a.logs.String())
		}
	})
	testbin.Eventually(t, "the home proven ready once its probe passed", func() bool { return homeState(t, a, "alice") == "running" })
}

// A caller released to a socket-activated home that never serves (its
// boot hangs) is not left in the home's accept queue: when the wake fails
// at its ready timeout, the queue is reset and the caller gets the wake's
// own answer (503 wake_timeout with Retry-After) at once, not a gateway
// timeout after home_response_header_timeout.
func TestQueuedCallerFailsWithTheWake(t *testing.T) {
	a := admStart(t, `
wake:
  idle_timeout: 0s
  ready_timeout: 2s
proxy:
  home_response_header_timeout: 60s
homes:
  - id: alice
    socket_activation: true
    command: ["/bin/sleep", "60"]
    probe: {kind: http}
`, "")
	wantWakeTimeout(t, a, "/node/alice/data")
	if strings.Contains(a.logs.String(), "reset the requests queued") {
		t.Errorf("the queue was not reset cleanly:\n%s", a.logs.String())
	}
}

// wantWakeTimeout asks a's path and wants the wake's own answer: 503
// wake_timeout with Retry-After.
func wantWakeTimeout(t *testing.T, a *admGateway, path string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Get("http://" + a.addr + path)
	if err != nil {
		t.Fatalf("the caller got no answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("caller: %d (Retry-After %q) %s; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "wake_timeout" {
		t.Fatalf("caller's body %s; want the code wake_timeout", body)
	}
}

// homeState is home id's status as the admin API reports it.
func homeState(t *testing.T, a *admGateway, id string) string {
	t.Helper()
	code, _, body := a.do(t, "GET", "/admin/homes/"+id, admToken, nil, nil)
	var h struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusOK {
		t.Fatalf("home %s: %d %s", id, code, body)
	}
	return h.Status
}

// A WebSocket to a cold socket-activated demo home (booting 300 ms) is
// forwarded at the home's start and upgraded once the home serves: the
// home says hello and echoes, and the wake is counted once.
func TestQueuedWebSocketToActivatedDemoHome(t *testing.T) {
	command := fmt.Sprintf(`[%q, "demo-home", "--listen-fd", "3", "--target", "{target}", "--boot-delay", "300ms"]`, testbin.Build(t))
	gw := e2eStartWithCommand(t, command, `
wake:
  idle_timeout: 0s
homes:
  - id: demo
    socket_activation: true
`)
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/demo/ws", nil)
	if err != nil {
		t.Fatalf("WebSocket to the cold home: %v\n%s", err, gw.logs.String())
	}
	defer conn.Close()
	e2eHello(t, conn, "demo")
	e2eEcho(t, conn, websocket.TextMessage, []byte("ping"))
	testbin.Eventually(t, "the wake's log line", func() bool { return strings.Contains(gw.logs.String(), "outcome=ready") })
	if n := strings.Count(gw.logs.String(), "msg=wake "); n != 1 {
		t.Fatalf("%d wakes logged, want 1:\n%s", n, gw.logs.String())
	}
}

// holdingPyHome takes every connection on descriptor 3, reads its request
// and never answers: a home whose boot hangs after it began to accept.
const holdingPyHome = `import socket

listener = socket.socket(fileno=3)
held = []
while True:
    conn, _ = listener.accept()
    conn.recv(65536)
    held.append(conn)
`

// A caller released to a socket-activated home that took its connection
// but never answered gets the wake's own answer when the wake fails and
// the home is stopped (the stop closes the connection unanswered): 503
// wake_timeout with Retry-After, never a 502.
func TestQueuedCallerClosedUnansweredGetsTheWakesAnswer(t *testing.T) {
	python, script := testbin.PythonScript(t, "holding_home.py", holdingPyHome)
	a := admStart(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 2s
proxy:
  home_response_header_timeout: 60s
homes:
  - id: alice
    socket_activation: true
    command: [%q, %q]
    probe: {kind: http}
`, python, script), "")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", a.logs.String())
		}
	})
	wantWakeTimeout(t, a, "/node/alice/data")
}
