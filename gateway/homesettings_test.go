package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// settingsHome is a home of its own: it answers every GET with its
// HOME_GREETING and its working directory, and GET .../ready with 418, a
// status that passes a probe only when the home's probe lists it.
const settingsHome = `import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/ready"):
            self.send_response(418)
            self.end_headers()
            return
        body = (os.environ.get("HOME_GREETING", "") + " " + os.getcwd()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// settingsPython returns the real python3 and the path of settingsHome,
// or skips the test.
func settingsPython(t *testing.T) (string, string) {
	t.Helper()
	return testbin.PythonScript(t, "settings_home.py", settingsHome)
}

// TestHomeOwnSettings: a home of the config file and a home of the admin
// API each run their own command, with their own env and working
// directory, proven ready by their own probe (a path and a status list the
// default rules would refuse), while the exec section's command stays the
// demo home's for the others.
func TestHomeOwnSettings(t *testing.T) {
	t.Parallel()
	py, script := settingsPython(t)
	cfgDir, apiDir := t.TempDir(), t.TempDir()
	a := admStart(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 20s
homes:
  - id: demo
  - id: py
    command: [%q, %q, "{port}"]
    env: [HOME_GREETING=from-config]
    working_dir: %q
    probe: {kind: http, path: /ready, statuses: [418]}
    ready_timeout: 15s
`, py, script, cfgDir), "")
	c := e2eClient(t)
	if res, body := e2eGet(t, c, "http://"+a.addr+"/node/py/", nil); res.StatusCode != http.StatusOK ||
		string(body) != "from-config "+cfgDir {
		t.Fatalf("config home: %d %q, want 200 %q", res.StatusCode, body, "from-config "+cfgDir)
	}
	if res, _ := e2eGet(t, c, "http://"+a.addr+"/node/demo/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("demo home: %d", res.StatusCode)
	}

	put := map[string]any{
		"command": []string{py, script, "{port}"}, "env": []string{"HOME_GREETING=from-api", "OTHER=secret-value"},
		"working_dir": apiDir, "ready_timeout": "15s", "idle_timeout": "0s",
		"probe": map[string]any{"kind": "http", "path": "/ready", "statuses": []int{418}},
	}
	code, _, body := a.do(t, "PUT", "/admin/homes/pyapi", admToken, nil, put)
	if code != http.StatusCreated {
		t.Fatalf("PUT: %d %s", code, body)
	}
	code, _, body = a.do(t, "GET", "/admin/homes/pyapi", admToken, nil, nil)
	v := admDecode[admin.HomeView](t, body)
	if code != http.StatusOK || strings.Join(v.Command, " ") != py+" "+script+" {port}" || v.WorkingDir != apiDir ||
		strings.Join(v.EnvKeys, ",") != "HOME_GREETING,OTHER" || v.ReadyTimeout != "15s" || v.Probe.Path != "/ready" ||
		len(v.Probe.Statuses) != 1 || v.Probe.Statuses[0] != 418 || v.Probe.Kind != "http" {
		t.Errorf("GET after PUT: %d %s", code, body)
	}
	if strings.Contains(string(body), "secret-value") {
		t.Errorf("the admin API shows an env value: %s", body)
	}
	if res, body := e2eGet(t, c, "http://"+a.addr+"/node/pyapi/", nil); res.StatusCode != http.StatusOK ||
		string(body) != "from-api "+apiDir {
		t.Fatalf("admin API home: %d %q, want 200 %q", res.StatusCode, body, "from-api "+apiDir)
	}
}

// TestHomeSettingsAdminValidation: a PUT with bad per-home settings is
// refused naming every bad field, with the config file's rules.
func TestHomeSettingsAdminValidation(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	code, _, body := a.do(t, "PUT", "/admin/homes/bad", admToken, nil, map[string]any{
		"command": []string{""}, "env": []string{"NOEQUALS"}, "working_dir": "relative/dir",
		"ready_timeout": "soon", "options": map[string]any{"zone": "a"},
		"probe": map[string]any{"kind": "http", "path": "health", "statuses": []int{99}, "settle": "-1s"},
	})
	if code != http.StatusBadRequest {
		t.Fatalf("bad settings: %d %s", code, body)
	}
	e := admDecode[admErr](t, body)
	got := map[string]bool{}
	for _, f := range e.Error.Fields {
		got[f.Field] = true
	}
	for _, f := range []string{"command", "env[0]", "working_dir", "ready_timeout", "options",
		"probe.path", "probe.statuses[0]", "probe.settle"} {
		if !got[f] {
			t.Errorf("field %s not named: %s", f, body)
		}
	}
	code, _, body = a.do(t, "PUT", "/admin/homes/st", admToken, nil, map[string]any{"provider": "static"})
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "options.endpoint" {
		t.Errorf("static home without an endpoint: %d %s", code, body)
	}
	code, _, body = a.do(t, "PUT", "/admin/homes/st", admToken, nil, map[string]any{"probe": map[string]any{"kind": "tcp", "colour": 1}})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "colour") {
		t.Errorf("unknown probe field: %d %s", code, body)
	}
}

// TestHomeSettingsStaticThroughAdmin: a static home registered through the
// admin API with its endpoint in its options serves from that endpoint.
func TestHomeSettingsStaticThroughAdmin(t *testing.T) {
	t.Parallel()
	up := e2eCountingUpstream(t)
	a := admStart(t, admDemo, "")
	code, _, body := a.do(t, "PUT", "/admin/homes/fixed", admToken, nil, map[string]any{
		"provider": "static", "probe": "tcp", "options": map[string]any{"endpoint": "http://" + up.Addr().String()}})
	if code != http.StatusCreated {
		t.Fatalf("PUT static: %d %s", code, body)
	}
	v := admDecode[admin.HomeView](t, body)
	var opts map[string]string
	if err := json.Unmarshal(v.Options, &opts); err != nil || opts["endpoint"] != "http://"+up.Addr().String() {
		t.Errorf("options shown as %s", v.Options)
	}
	if res, body := e2eGet(t, e2eClient(t), "http://"+a.addr+"/node/fixed/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("static home: %d %s", res.StatusCode, body)
	}
}
