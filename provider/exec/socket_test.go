package execprov

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// unixPyHome is a home as a newcomer would write one for {socket}: the
// standard library's Unix stream server with the HTTP request handler. It
// does not remove a socket file left by an earlier run (its bind would
// fail with "address already in use"): the provider does. It serves one
// connection at a time, which HTTP/1.0 (the handler's default) closes
// after each answer.
const unixPyHome = `import http.server, os, socketserver, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/version":
            body = b"v-socket"
        else:
            body = ("path=%s host=%s socket=%s" % (self.path, self.headers.get("Host"), os.environ.get("WAKEGATE_SOCKET"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass  # the default names the client's address, which a Unix socket has not

with socketserver.UnixStreamServer(sys.argv[1], Handler) as server:
    server.serve_forever()
`

// TestSocketHomePython wakes a Python home on {socket}: its endpoint is
// unix://<data_dir>/homes/<id>/.wakegate.sock, the version check reaches
// it, a socket left by an earlier process does not keep it from starting,
// and a gateway started again adopts it from its ref.
func TestSocketHomePython(t *testing.T) {
	python, script := testbin.PythonScript(t, "unix_home.py", unixPyHome)
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{python, script, "{socket}"}
	sock := filepath.Join(dir, "homes", "h1", ".wakegate.sock")

	// A socket file nobody listens on, as a killed home leaves it.
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	_ = stale.Close()

	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1"}
	r := wake(t, e, s)
	if r.Endpoint != "unix://"+sock {
		t.Fatalf("endpoint %q, want unix://%s", r.Endpoint, sock)
	}
	if ref := mustRef(t, r); ref.Port != 0 || ref.Socket != sock {
		t.Fatalf("ref %+v: want the socket and no port", ref)
	}
	if v := waitReady(t, r.Endpoint); v != "v-socket" {
		t.Fatalf("GET /version = %q", v)
	}
	body, err := get(r.Endpoint, "/hello")
	if err != nil || body != "path=/hello host=localhost socket="+sock {
		t.Fatalf("GET /hello = %q, %v", body, err)
	}
	if v, err := e.Version(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref}); err != nil || v != "v-socket" {
		t.Fatalf("Version = %q, %v", v, err)
	}

	// Another gateway adopts the running home at its socket.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := newExec(t, cfg)
	s.Ref = r.Ref
	if r2 := wake(t, e2, s); r2.Endpoint != r.Endpoint || r2.Ref != r.Ref {
		t.Fatalf("adopting wake %+v, want %+v", r2, r)
	}

	// Stopped by SIGTERM, Python leaves its socket file behind; the next
	// start removes it.
	if proven, err := e2.Stop(context.Background(), s); err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Logf("no socket left after the stop (%v): the restart below proves less", err)
	}
	s.Ref = ""
	r3 := wake(t, e2, s)
	if v := waitReady(t, r3.Endpoint); v != "v-socket" || mustRef(t, r3).PID == mustRef(t, r).PID {
		t.Fatalf("restarted home: version %q, ref %s", v, r3.Ref)
	}
}

// TestSocketPathTooLong: a data_dir whose home socket path passes the 107
// bytes of a Unix socket's address fails the start with the home, the
// path and the fix named.
func TestSocketPathTooLong(t *testing.T) {
	dir := filepath.Join(testDataDir(t), strings.Repeat("d", 90))
	cfg := testConfig(dir)
	cfg.Command = []string{"{self}", "home", "-socket={socket}"}
	e := newExec(t, cfg)
	_, err := e.Wake(context.Background(), provider.Spec{ID: "h1", Target: "alice", Version: "v1"})
	if err == nil {
		t.Fatal("Wake succeeded with a socket path too long")
	}
	for _, want := range []string{"home h1 listens on {socket}", filepath.Join(dir, "homes", "h1", ".wakegate.sock"), "more than the 107", "shorter data_dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := SocketPathOf(dir, "h1"); err == nil {
		t.Error("SocketPathOf accepts the path")
	}
	if p, err := SocketPathOf("/srv/wakegate", "h1"); err != nil || p != "/srv/wakegate/homes/h1/.wakegate.sock" ||
		endpoint.CheckSocketPath(p) != nil {
		t.Errorf("SocketPathOf short = %q, %v", p, err)
	}
}
