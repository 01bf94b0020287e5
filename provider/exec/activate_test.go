package execprov

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
)

// activatedPyHome serves HTTP on the socket it was handed as descriptor 3,
// after a boot of argv[1] seconds, and answers what systemd's protocol
// told it.
const activatedPyHome = `import http.server, os, socket, sys, time

time.sleep(float(sys.argv[1]))

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("pid=%d listen_pid=%s fds=%s names=%s" % (os.getpid(), os.environ.get("LISTEN_PID"),
            os.environ.get("LISTEN_FDS"), os.environ.get("LISTEN_FDNAMES"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
server.socket.close()
server.socket = socket.socket(fileno=3)
server.serve_forever()
`

// TestSocketActivationPython starts a Python home with socket activation
// and a boot of 300 ms: a request sent the moment Wake returns, before the
// home listens, is answered; the home sees LISTEN_PID equal to its own
// pid, set without the shell; and the port stays the same across a stop
// and the next start.
func TestSocketActivationPython(t *testing.T) {
	python, script := testbin.PythonScript(t, "activated_home.py", activatedPyHome)
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{python, script, "0.3"}
	cfg.SocketActivation = true
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	var first string
	for round := range 2 {
		r := wake(t, e, s)
		body, err := get(r.Endpoint, "/")
		if err != nil {
			t.Fatalf("round %d: a request sent before the home listened: %v", round, err)
		}
		ref := mustRef(t, r)
		pid := ref.PID
		if want := fmt.Sprintf("pid=%d listen_pid=%d fds=1 names=http", pid, pid); body != want {
			t.Fatalf("round %d: the home says %q, want %q", round, body, want)
		}
		// Started without the shell: its first program is the home's.
		if exe, err := filepath.EvalSymlinks(python); err != nil || ref.Exe != exe || e.viaShell.Load() {
			t.Fatalf("round %d: the home was started as %s (through the shell: %t), want %s (%v)", round, ref.Exe, e.viaShell.Load(), exe, err)
		}
		if round == 0 {
			first = r.Endpoint
		} else if r.Endpoint != first {
			t.Errorf("the endpoint moved from %s to %s across a stop", first, r.Endpoint)
		}
		if proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref}); err != nil || !proven {
			t.Fatalf("Stop = %v, %v", proven, err)
		}
	}
}

// TestSocketActivationDemoHome starts the demo home with --listen-fd 3 and
// a boot delay, through the per-home option: a request sent before it
// listens is answered.
func TestSocketActivationDemoHome(t *testing.T) {
	bin := testbin.Build(t)
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{bin, "demo-home", "--listen-fd", "3", "--target", "{target}", "--boot-delay", "300ms"}
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Target: "alice", Version: "v1", Options: []byte(`{"socket_activation":true}`)})
	if _, err := get(r.Endpoint, "/node/alice/"); err != nil {
		t.Fatalf("a request sent before the demo home listened: %v", err)
	}
}

// TestSocketActivationStorm wakes 500 socket-activated homes at once:
// none fails to start (the gateway binds each port itself, so no home can
// lose its port to another between its choice and its bind), every port
// is distinct and accepts connections while the homes, which never
// listen themselves, run.
func TestSocketActivationStorm(t *testing.T) {
	const homes = 500
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{"/bin/sleep", "60"}
	cfg.SocketActivation = true
	cfg.StopGrace = time.Second
	e := newExec(t, cfg)
	var wg sync.WaitGroup
	results := make([]provider.Result, homes)
	errs := make([]error, homes)
	sem := make(chan struct{}, 32)
	for i := range homes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = e.Wake(context.Background(), provider.Spec{ID: "s" + strconv.Itoa(i), Version: "v1"})
		})
	}
	wg.Wait()
	ports := map[string]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("home %d: %v", i, errs[i])
		}
		host := strings.TrimPrefix(r.Endpoint, "http://")
		if ports[host] {
			t.Fatalf("two homes on %s", host)
		}
		ports[host] = true
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatalf("home %d at %s: %v", i, host, err)
		}
		c.Close()
	}
	for _, q := range e.Quiesce(context.Background(), nil) {
		if !q.Proven || q.Err != nil {
			t.Fatalf("quiesce %s: %v, %v", q.ID, q.Proven, q.Err)
		}
	}
}

// TestSocketActivationFailQueued sends a request to a socket-activated
// home that never accepts (its boot hangs), then fails the queue: the
// waiting connection is reset at once, while the home's process still
// holds the socket, and the socket listens again on the same port, so a
// connection made after is queued, not refused.
func TestSocketActivationFailQueued(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{"/bin/sleep", "60"}
	cfg.SocketActivation = true
	cfg.StopGrace = time.Second
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	if !r.Queued {
		t.Fatalf("a socket-activated home's wake says Queued false")
	}
	host := strings.TrimPrefix(r.Endpoint, "http://")
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial the home's socket: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := e.FailQueued(s); err != nil {
		t.Fatalf("FailQueued: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the queued connection read %d bytes, %v; want a reset", n, err)
	}
	c2, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatalf("after the queue failed, %s does not listen: %v", host, err)
	}
	c2.Close()
	if proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref}); err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
	if r2 := wake(t, e, s); r2.Endpoint != r.Endpoint {
		t.Errorf("the endpoint moved from %s to %s after the queue failed", r.Endpoint, r2.Endpoint)
	}
}

// TestActivatedHomeRunsInsideItsLimitsV1: where a home's process cap is a
// cgroup v1 (pids), a socket-activated home is in it from its first
// instruction. Its first program reads its own cgroups with the shell's
// builtins alone, before it could fork; that reading already names the
// home's pids cgroup, not the gateway's.
func TestActivatedHomeRunsInsideItsLimitsV1(t *testing.T) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || !strings.Contains(string(own), ":pids:") {
		t.Skip("no cgroup v1 pids hierarchy on this machine: a home's process cap is its cgroup v2's, set at its clone")
	}
	dir := testDataDir(t)
	cfg := testConfig(dir)
	if c, err := chooseContainment(ContainAuto, cfg.DataDir); err != nil || c.mode != ContainCgroup {
		t.Skip("the homes get no cgroup of their own here (needs root and cgroup v2)")
	}
	cfg.Command = []string{"/bin/sh", "-c", `while read -r l; do echo "cg $l"; done < /proc/self/cgroup; exec sleep 60`}
	cfg.SocketActivation = true
	cfg.StopGrace = time.Second
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	var line string
	testbin.Eventually(t, "the home's first reading of its cgroups in its log", func() bool {
		for l := range strings.SplitSeq(homeLog(t, e, "h1"), "\n") {
			if strings.HasPrefix(l, "cg ") && strings.Contains(l, ":pids:") {
				line = l
				return true
			}
		}
		return false
	})
	if !strings.HasSuffix(line, "/"+cgroup.Prefix+"h1") {
		t.Errorf("the home's first instruction ran in pids cgroup %q, want its own (…/%sh1)", line, cgroup.Prefix)
	}
	if proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref}); err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
}
