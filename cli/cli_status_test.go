package cli

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// notFoundHome is a home that listens and answers 404 to everything.
const notFoundHome = `import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestStatusShowsWhatFailed: `wakegate status` exits 1 and names the cause
// and the likely fix of a home whose last wake failed (a home that answers
// 404 everywhere, which fails its wake early, though the home is not in
// the failed state) and of an app held back by a mistake (no strip_prefix:
// it answers 404 under /apps/{slug}/, where the gateway forwards it); it
// exits 3 when no admin listener answers.
func TestStatusShowsWhatFailed(t *testing.T) {
	const token = "status-test-token-0123456789"
	py, script := testbin.PythonScript(t, "notfound.py", notFoundHome)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(up.Close)
	admin := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	gw := testbin.Serve(t, fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
admin:
  listen: %q
  tokens: [%q]
homes:
  - id: nf
    command: [%q, %q, "{port}"]
apps:
  - slug: rooted
    upstream: %s
`, admin, token, py, script, up.URL))
	status := func() (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"status", "--admin", admin, "--token", token}, &out, &errb)
		return code, out.String() + errb.String()
	}

	var out string
	testbin.Eventually(t, "status to name the app held back by its prefix", func() bool {
		var code int
		code, out = status()
		return code == 1 && strings.Contains(out, "app /apps/rooted/ is failed (unhealthy)")
	})
	if !strings.Contains(out, "hint: ") || !strings.Contains(out, "strip_prefix: true") {
		t.Errorf("status lacks the app's hint:\n%s", out)
	}

	res, err := http.Get("http://" + gw.Addr + "/node/nf/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	// wake_failed, not wake_timeout: the probe gave up on the 404s before
	// the 30s ready timeout.
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"wake_failed"`) {
		t.Fatalf("wake of a home that answers 404: %d %s, want 503 wake_failed", res.StatusCode, body)
	}
	testbin.Eventually(t, "status to name the home whose wake failed", func() bool {
		var code int
		code, out = status()
		return code == 1 && strings.Contains(out, "home nf: last wake failed")
	})
	for _, w := range []string{"404", "hint: "} {
		if !strings.Contains(out, w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
	// Said once, with its hint: not again as a problem line.
	if n := strings.Count(out, "last wake failed"); n != 1 {
		t.Errorf("status says %d times that the last wake failed:\n%s", n, out)
	}

	var o, e bytes.Buffer
	closed := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	if code := run([]string{"status", "--admin", closed, "--token", token}, &o, &e); code != statusNoAnswer {
		t.Errorf("status with no admin listener: exit %d, want %d\n%s", code, statusNoAnswer, e.String())
	}
}

// A warning of the status (exec homes that share the gateway's user) is
// printed after the tables, and does not make the instance unhealthy.
func TestStatusPrintsWarnings(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, admin.Status{Healthy: true, Version: "v", Instance: "i",
		Warnings: []string{"2 exec homes run as the gateway's user (uid 1000) because it is not root"}})
	got := out.String()
	if !strings.Contains(got, "healthy") || !strings.Contains(got, "\nwarning: 2 exec homes run as the gateway's user") {
		t.Fatalf("status printed:\n%s", got)
	}
}

// status prints how exec homes are contained, and why.
func TestStatusPrintsContainment(t *testing.T) {
	var out bytes.Buffer
	printStatus(&out, admin.Status{Healthy: true, Version: "v", Instance: "i",
		Containment: "cgroup: hybrid cgroups (v2 at /sys/fs/cgroup/unified); each home runs in a cgroup of its own"})
	if got := out.String(); !strings.Contains(got, "\nexec containment: cgroup: hybrid cgroups") {
		t.Fatalf("status printed:\n%s", got)
	}
}
