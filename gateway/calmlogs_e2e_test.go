package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestCalmLogsOfAnOrdinaryLife: a home app woken by a request, polled by
// the waiting page, health-checked by a load balancer and suspended when
// idle writes no warning or error; its route is withdrawn at INFO with
// neutral words; the polls and health checks write no access line, while
// the user's request does.
func TestCalmLogsOfAnOrdinaryLife(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `wake:
  idle_timeout: 1s
homes:
  - id: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
    health: {interval: 200ms}
`)
	c := e2eClient(t)
	for _, p := range []string{"/apps/demo/", "/_wakegate/wake/app/demo", "/healthz", "/readyz"} {
		res, err := c.Get("http://" + gw.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
	}
	testbin.Eventually(t, "the route withdrawn after the idle suspend", func() bool {
		return len(gw.logs.Lines(`"route withdrawn"`)) > 0
	})
	line := gw.logs.Lines(`"route withdrawn"`)[0]
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "until the next wake") {
		t.Errorf("withdrawal line %q: want INFO and until the next wake", line)
	}
	for _, l := range strings.Split(gw.logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("an ordinary life logged %q", l)
		}
	}
	access := gw.logs.Lines("access")
	if len(access) != 1 || !strings.Contains(access[0], "path=/apps/demo/") {
		t.Errorf("access lines %q: want the user's request alone", access)
	}
}

// TestWakeProgressLine: a wake longer than the progress interval (a home
// that boots for 6s) logs a line with its phase and elapsed time before
// its outcome.
func TestWakeProgressLine(t *testing.T) {
	t.Parallel()
	command := fmt.Sprintf(`[%q, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--boot-delay", "6s"]`, testbin.Build(t))
	gw := e2eStartWithCommand(t, command, `
wake:
  ready_timeout: 30s
homes:
  - id: slow
`)
	res, err := e2eClient(t).Get("http://" + gw.addr + "/node/slow/")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", res.StatusCode)
	}
	lines := gw.logs.Lines(`"wake in progress"`)
	if len(lines) == 0 {
		t.Fatalf("no progress line during a 6s wake")
	}
	for _, w := range []string{"home=slow", "phase=probing", "elapsed_s=", "last_answer="} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("progress line %q lacks %q", lines[0], w)
		}
	}
	if !strings.Contains(lines[0], "connection refused") {
		t.Errorf("progress line %q does not say the port is not open yet", lines[0])
	}
}

// TestAdminWritesLogged: an admin write is logged with the token that
// made it (named by its position and hash, never its value) and what it
// did; an admin read is not.
func TestAdminWritesLogged(t *testing.T) {
	t.Parallel()
	a := admStart(t, "homes:\n  - id: demo\n", "")
	if code, _, body := a.do(t, http.MethodGet, "/admin/homes/demo", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("get: %d %s", code, body)
	}
	if code, _, body := a.do(t, http.MethodPost, "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	lines := a.logs.Lines(`"admin write"`)
	if len(lines) != 1 {
		t.Fatalf("admin write lines %q: want the wake alone", lines)
	}
	for _, w := range []string{`token="admin.tokens[0] sha256:`, "method=POST", "path=/admin/homes/demo/wake", "status=200", "request_id=adm-"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("line %q lacks %q", lines[0], w)
		}
	}
	if strings.Contains(a.logs.String(), admToken) {
		t.Errorf("the log carries the token itself")
	}
}
