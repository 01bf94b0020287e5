package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// releaseHome is version 2's own program: GET /version answers 2 (the
// roll's assert), anything else "release 2".
const releaseHome = `import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"2" if self.path == "/version" else b"release 2"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestReleaseSurvivesRestart: a home rolled onto version 2, whose target
// runs its own command, wakes with that command after the gateway restarts
// with another target (3) and rolls off: the release is stored with the
// home, not only remembered by the gateway that rolled it.
func TestReleaseSurvivesRestart(t *testing.T) {
	t.Parallel()
	// Readable by a home of its own user (a root gateway's).
	py, script := testbin.PythonScript(t, "release2.py", releaseHome)
	data := filepath.Join(t.TempDir(), "data")
	demo := fmt.Sprintf("[%q, \"demo-home\", \"--addr\", \"127.0.0.1:{port}\", \"--target\", \"{target}\", \"--version\", \"{version}\"]",
		testbin.Build(t))
	start := func(roll string) (string, func()) {
		text := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nexec:\n  command: %s\nwake:\n  idle_timeout: 0s\n  probe: {kind: http, path: /}\n%s\nhomes:\n  - id: h1\n",
			data, demo, roll)
		cfg, err := all.Load("release.yaml", []byte(text))
		if err != nil {
			t.Fatalf("config: %v", err)
		}
		logs := &testbin.LogBuffer{}
		g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			g.Close()
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- g.Serve(ctx, ln) }()
		return ln.Addr().String(), func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
			g.Close()
			if t.Failed() {
				t.Logf("gateway log:\n%s", logs.String())
			}
		}
	}
	t.Cleanup(func() { testbin.KillHomes(data) })
	c := e2eClient(t)

	addr, stop := start(fmt.Sprintf("roll:\n  mode: lazy\n  target: {version: \"2\", command: [%q, %q, \"{port}\"]}", py, script))
	res, body := e2eGet(t, c, "http://"+addr+"/node/h1/", nil)
	stop()
	if res.StatusCode != http.StatusOK || string(body) != "release 2" {
		t.Fatalf("first gateway: %d %q, want the home rolled onto release 2", res.StatusCode, body)
	}

	addr, stop = start("roll:\n  mode: \"off\"\n  target: {version: \"3\"}")
	defer stop()
	res, body = e2eGet(t, c, "http://"+addr+"/node/h1/", nil)
	if res.StatusCode != http.StatusOK || string(body) != "release 2" {
		t.Fatalf("after the restart: %d %q, want version 2's own command (release 2)", res.StatusCode, body)
	}
}
