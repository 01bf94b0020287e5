package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// admAppView is the part of an app answer the operation tests read.
type admAppView struct {
	Slug      string `json:"slug"`
	Phase     string `json:"phase"`
	Reason    string `json:"reason"`
	Route     string `json:"route"`
	Operation string `json:"operation"`
}

// admOps is a config with two apps in one home: demo, whose health check
// passes, and stuck, whose health check never does (it stays starting
// inside its long start period), and an app outside any home.
const admOps = admDemo + `  - slug: stuck
    home: demo
    path: /apps/demo
    health:
      path: /no-such-health-check
      start_period: 10m
  - slug: outside
    upstream: %s
`

// TestAdminAppOperations runs app start, stop and restart through the
// admin API of a real gateway and checks each lands in its phase with the
// route, the home and the public path following: stop unpublishes the
// route (the public path answers 503 app_stopped) and suspends the home;
// start and restart wake it and publish the route again. A start whose
// wait runs out answers 504 with the operation phase it was in.
func TestAdminAppOperations(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(up.Close)
	a := admStart(t, fmt.Sprintf(admOps, up.URL), "")
	op := func(path string) (int, admAppView, []byte) {
		t.Helper()
		code, _, body := a.do(t, "POST", path, admToken, nil, nil)
		return code, admDecode[admAppView](t, body), body
	}
	home := func() string {
		t.Helper()
		_, _, body := a.do(t, "GET", "/admin/homes/demo", admToken, nil, nil)
		return admDecode[admHome](t, body).Status
	}
	public := "http://" + a.addr + "/apps/demo/whoami"

	code, v, body := op("/admin/apps/demo/start?wait=60s")
	if code != http.StatusOK || v.Phase != "ready" || v.Route != "published" || v.Operation != "" {
		t.Fatalf("start: %d %s", code, body)
	}
	e2eGetWhoami(t, a.client, public, nil)
	if s := home(); s != "running" {
		t.Fatalf("home after start: %s", s)
	}

	code, v, body = op("/admin/apps/demo/stop")
	if code != http.StatusOK || v.Phase != "stopped" || v.Reason != "stopped" || v.Route != "candidate" {
		t.Fatalf("stop: %d %s", code, body)
	}
	if s := home(); s != "suspended" {
		t.Errorf("home after stop: %s", s)
	}
	res, body := e2eGet(t, a.client, public, nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("X-Wakegate-App-Phase") != "stopped" {
		t.Errorf("public request to the stopped app: %d %v %s", res.StatusCode, res.Header, body)
	}

	code, v, body = op("/admin/apps/demo/restart?wait=60s")
	if code != http.StatusOK || v.Phase != "ready" || v.Route != "published" {
		t.Fatalf("restart: %d %s", code, body)
	}
	e2eGetWhoami(t, a.client, public, nil)
	if s := home(); s != "running" {
		t.Errorf("home after restart: %s", s)
	}

	// The wait runs out: 504 with the app as it was, in start.waitReady.
	code, v, body = op("/admin/apps/stuck/start?wait=1s")
	if code != http.StatusGatewayTimeout || v.Slug != "stuck" || v.Phase != "starting" || v.Operation != "start.waitReady" {
		t.Errorf("start that does not finish: %d %s", code, body)
	}

	cases := []struct {
		path, code, field string
		status            int
	}{
		{"/admin/apps/nope/start", "app_not_found", "slug", http.StatusNotFound},
		{"/admin/apps/demo/stop?wait=forever", "invalid", "wait", http.StatusBadRequest},
		{"/admin/apps/demo/start?wait=0s", "invalid", "wait", http.StatusBadRequest},
		{"/admin/apps/outside/restart", "not_home_app", "slug", http.StatusBadRequest},
	}
	for _, tc := range cases {
		code, _, body := a.do(t, "POST", tc.path, admToken, nil, nil)
		e := admDecode[admErr](t, body)
		if code != tc.status || e.Error.Code != tc.code || e.Error.Field != tc.field {
			t.Errorf("POST %s: %d %s, want %d %s naming %s", tc.path, code, body, tc.status, tc.code, tc.field)
		}
	}
}

// TestAdminAppCLI runs `wakegate app start|stop|restart` of the real
// binary against a real gateway: each exits 0 once the app is in the
// phase it aims at and prints the app; unknown apps exit 1 with the
// admin API's error; usage errors exit 2.
func TestAdminAppCLI(t *testing.T) {
	t.Parallel()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	testbin.ServeIn(t, t.TempDir(), fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log: {access: false}
admin:
  listen: %q
  tokens: [%q]
`, adminAddr, admToken)+admDemo)
	env := []string{"WAKEGATE_ADMIN=" + adminAddr, "WAKEGATE_TOKEN=" + admToken}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return admRunCLI(t, env, args...)
	}
	for _, step := range []struct {
		args  []string
		phase string
	}{
		{[]string{"app", "start", "demo", "--wait", "60s"}, "ready"},
		{[]string{"app", "stop", "demo"}, "stopped"},
		{[]string{"app", "restart", "demo"}, "ready"},
	} {
		code, out, errs := run(step.args...)
		if code != 0 || !strings.Contains(out, `"phase": "`+step.phase+`"`) {
			t.Fatalf("%v: exit %d\n%s%s", step.args, code, out, errs)
		}
	}
	if code, out, errs := run("app", "start", "nope"); code != 1 || !strings.Contains(errs, "404 app_not_found") {
		t.Errorf("unknown app: exit %d\n%s%s", code, out, errs)
	}
	for _, bad := range [][]string{{"app", "jump", "demo"}, {"app", "start"}, {"app", "stop", "demo", "--wait", "forever"},
		{"app", "refresh", "demo", "--wait", "30s"}} {
		if code, out, errs := run(bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", bad, code, out, errs)
		}
	}
}

// TestAdminErrorBody checks the admin API's one error body: the code, the
// message, the field, the cause and the hint for the operator, and the
// request id the answer's X-Request-Id carries. A home whose command does
// not exist fails to wake: the admin answer names the cause (the public
// answer for the same home does not).
func TestAdminErrorBody(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(testbin.OpenDir(t), "no-such-home-command")
	gw := e2eStartWithCommand(t, fmt.Sprintf("[%q, \"{port}\"]", missing), admConfig(`
wake:
  idle_timeout: 0s
  ready_timeout: 2s
homes:
  - id: ghost
`, ""))
	a := admServe(t, gw)

	code, hdr, body := a.do(t, "POST", "/admin/homes/ghost/wake", admToken, nil, nil)
	e := admDecode[admFullErr](t, body).Error
	if code != http.StatusServiceUnavailable || e.Code != "wake_failed" || !strings.Contains(e.Cause, missing) ||
		e.Hint == "" || e.RequestID == "" || e.RequestID != hdr.Get("X-Request-Id") || hdr.Get("Retry-After") == "" {
		t.Errorf("failed wake: %d %v %s", code, hdr, body)
	}
	res, pub := e2eGet(t, a.client, "http://"+a.addr+"/node/ghost/", nil)
	if res.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(pub), missing) {
		t.Errorf("public answer for the same home: %d %s", res.StatusCode, pub)
	}

	code, hdr, body = a.do(t, "PUT", "/admin/homes/ghost", admToken, map[string]string{"If-Match": `"99"`}, map[string]any{})
	e = admDecode[admFullErr](t, body).Error
	if code != http.StatusConflict || e.Code != "conflict" || e.Field != "If-Match" || e.Hint == "" || e.RequestID != hdr.Get("X-Request-Id") {
		t.Errorf("stale If-Match: %d %s", code, body)
	}
	code, hdr, body = a.do(t, "GET", "/admin/no-such-route", admToken, nil, nil)
	e = admDecode[admFullErr](t, body).Error
	if code != http.StatusNotFound || e.Code != "not_found" || e.RequestID == "" || e.RequestID != hdr.Get("X-Request-Id") {
		t.Errorf("no route: %d %s", code, body)
	}
}

// admFullErr is the admin error body with the operator's fields.
type admFullErr struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Field     string `json:"field"`
		Cause     string `json:"cause"`
		Hint      string `json:"hint"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// A home that runs but never listens fails its wake; the admin home view
// says that the gateway stopped it afterwards and whether that stop was
// proven, not only the log.
func TestAdminHomeShowsStopOfFailedWake(t *testing.T) {
	t.Parallel()
	gw := e2eStartWithCommand(t, `["/bin/sleep", "300"]`, admConfig(`
wake:
  idle_timeout: 0s
  ready_timeout: 1s
  probe: {kind: tcp}
homes:
  - id: mute
`, ""))
	a := admServe(t, gw)

	code, _, body := a.do(t, "GET", "/admin/homes/mute", admToken, nil, nil)
	if code != http.StatusOK || strings.Contains(string(body), "last_stop") {
		t.Fatalf("home before any wake: %d %s", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/homes/mute/wake", admToken, nil, nil)
	if code != http.StatusServiceUnavailable || admDecode[admFullErr](t, body).Error.Code != "wake_timeout" {
		t.Fatalf("wake of a home that never listens: %d %s", code, body)
	}
	var v struct {
		LastStop *struct {
			At     time.Time `json:"at"`
			Proven bool      `json:"proven"`
		} `json:"last_stop"`
	}
	testbin.Eventually(t, "the stop of the failed wake in the home view", func() bool {
		code, _, body = a.do(t, "GET", "/admin/homes/mute", admToken, nil, nil)
		v.LastStop = nil
		return code == http.StatusOK && json.Unmarshal(body, &v) == nil && v.LastStop != nil &&
			len(admDecode[admin.HomeView](t, body).Wakes) > 0
	})
	if !v.LastStop.Proven || v.LastStop.At.IsZero() {
		t.Fatalf("last_stop %+v: want a proven stop with its time", *v.LastStop)
	}
	// The wake history says the same of the failed wake.
	if d := admDecode[admin.HomeView](t, body); len(d.Wakes) != 1 || d.Wakes[0].Outcome != "failed" ||
		d.Wakes[0].StopProven == nil || !*d.Wakes[0].StopProven || d.Wakes[0].Error == "" {
		t.Fatalf("wakes %+v: want one failed wake with a proven stop", d.Wakes)
	}
}
