package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestRegistrarConfigWinsOverStoredApp registers an app through the admin
// API of the real binary, then restarts the gateway on the same data dir
// with a config that declares an app of the same slug: the config's app
// is served, the stored one is not restored (and the log says why), and
// the admin API cannot replace or remove the config's app. Its record is
// kept: a restart whose config no longer declares the slug restores it.
func TestRegistrarConfigWinsOverStoredApp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	base := fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log: {access: false}
wake:
  idle_timeout: 0s
admin:
  listen: %q
  tokens: [%q]
homes:
  - id: demo
`, adminAddr, admToken)
	adm := &admGateway{admin: "http://" + adminAddr, client: e2eClient(t)}
	source := func() (string, uint64) {
		t.Helper()
		code, _, body := adm.do(t, "GET", "/admin/apps/later", admToken, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("GET app: %d %s", code, body)
		}
		v := admDecode[rtAppView](t, body)
		return v.Source, v.Generation
	}

	p1 := testbin.ServeIn(t, dir, base)
	if code, _, body := adm.do(t, "PUT", "/admin/apps/later", admToken, nil, map[string]any{"home": "demo", "path": "/apps/demo"}); code != http.StatusCreated {
		t.Fatalf("register app: %d %s", code, body)
	}
	p1.Stop()

	p2 := testbin.ServeIn(t, dir, base+"apps:\n  - slug: later\n    home: demo\n    path: /apps/demo\n")
	if src, gen := source(); src != "config" || gen != 0 {
		t.Errorf("app after a restart whose config declares it: source %s generation %d", src, gen)
	}
	for _, m := range []string{"PUT", "DELETE"} {
		code, _, body := adm.do(t, m, "/admin/apps/later", admToken, nil, map[string]any{"home": "demo"})
		if e := admDecode[admFullErr](t, body).Error; code != http.StatusConflict || e.Code != "config_app" || e.Hint == "" {
			t.Errorf("%s of the config's app: %d %s", m, code, body)
		}
	}
	if lines := strings.Split(p2.Output(), "\n"); !containsAll(lines, "stored app not restored", "app=later", "config wins") {
		t.Errorf("no log line says the config won over the stored app:\n%s", p2.Output())
	}
	p2.Stop()

	testbin.ServeIn(t, dir, base)
	if src, gen := source(); src != "api" || gen != 1 {
		t.Errorf("app after a restart without it in the config: source %s generation %d", src, gen)
	}
}

// containsAll reports whether one of lines contains every one of parts.
func containsAll(lines []string, parts ...string) bool {
	for _, l := range lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
