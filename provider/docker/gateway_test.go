package docker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

const adminToken = "docker-test-admin-token-0123456789"

var gatewaySeq atomic.Int32

// gatewayName is a name for one test's gateway on the shared engine.
func gatewayName() string { return fmt.Sprintf("wgt%d-%d", os.Getpid(), gatewaySeq.Add(1)) }

func unixTransport(sock string) *http.Transport {
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
}

// rig is a gateway with providers.docker on the test engine.
type rig struct {
	e     *engine
	name  string
	dir   string // the gateway's working folder (and data)
	admin string // base URL of the admin listener
	gw    *testbin.Proc
}

// gatewayConfig is a config with the admin API, providers.docker on e
// (plus the section lines extra) and homes (YAML list items).
func (r *rig) config(extra, top, homes string) string {
	return fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log:
  access: false
wake:
  ready_timeout: 20s
admin:
  listen: %q
  tokens: [%q]
%sproviders:
  docker:
    host: %q
    name: %s
    image: "%s:{version}"
    command: ["demo-home", "--addr", "0.0.0.0:{port}", "--target", "{target}", "--version", "{version}"]
    pull: never
    stop_timeout: 2s
%shomes:
%s`, strings.TrimPrefix(r.admin, "http://"), adminToken, top, r.e.host, r.name, imageRepo, extra, homes)
}

func newRig(t *testing.T) *rig {
	e := podman(t)
	r := &rig{e: e, name: gatewayName(), dir: t.TempDir(),
		admin: fmt.Sprintf("http://127.0.0.1:%d", testbin.FreePort(t))}
	e.cleanup(t, r.name)
	return r
}

// serve starts the gateway on cfg in the rig's folder.
func (r *rig) serve(t *testing.T, cfg string) {
	t.Helper()
	r.gw = testbin.ServeIn(t, r.dir, cfg)
}

// get sends GET path through the gateway and returns status and body.
func (r *rig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 40 * time.Second}
	res, err := c.Get("http://" + r.gw.Addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, r.gw.Output())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// adm calls the admin API and decodes its JSON answer into out (if not nil).
func (r *rig) adm(t *testing.T, method, path string, body any, out any) (int, string) {
	t.Helper()
	return testbin.Admin(t, r.admin, adminToken, method, path, body, out)
}

// version asks home target for its page through the gateway and returns
// the status and the version the page names ("" when it names none).
func (r *rig) version(t *testing.T, target string) (int, string) {
	t.Helper()
	code, body := r.get(t, "/node/"+target+"/")
	_, rest, ok := strings.Cut(body, "version: <code>")
	if !ok {
		return code, ""
	}
	v, _, _ := strings.Cut(rest, "</code>")
	return code, v
}

// home reads home id through the admin API.
func (r *rig) home(t *testing.T, id string) testbin.HomeView {
	t.Helper()
	return testbin.AdminHome(t, r.admin, adminToken, id)
}

// TestGatewayWakesContainer: the first request creates and starts the
// home's container and is answered through the gateway by the home in it;
// the idle suspend stops the container (the engine says exited); the next
// request starts the same container again.
func TestGatewayWakesContainer(t *testing.T) {
	r := newRig(t)
	r.serve(t, r.config("", "", "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 1s}\n"))
	if cs := r.e.containers(t, r.name); len(cs) != 0 {
		t.Fatalf("containers before the first request: %+v", cs)
	}
	code, body := r.version(t, "d1")
	if code != http.StatusOK || body != "1" {
		t.Fatalf("first request: %d %q\n%s", code, body, r.gw.Output())
	}
	// The answer came from the home, so its container ran; on a slow
	// machine its idle second may have passed before this look, and the
	// container is stopped already: then its suspend is logged once the
	// stop is proven.
	first := r.e.one(t, r.name)
	if first.Home != "d1" || first.Version != "1" {
		t.Fatalf("container after the first request: %+v", first)
	}
	if first.State != "running" {
		testbin.Eventually(t, "a suspend of d1 logged, the container having run", func() bool {
			return strings.Contains(r.gw.Output(), "msg=suspend component=wake home=d1")
		})
	}
	testbin.Eventually(t, "the idle home's container stops", func() bool {
		return r.e.one(t, r.name).State == "exited"
	})
	testbin.Eventually(t, "the home is recorded suspended", func() bool {
		return r.home(t, "d1").Status == "suspended"
	})
	code, body = r.version(t, "d1")
	if code != http.StatusOK || body != "1" {
		t.Fatalf("request after the suspend: %d %q\n%s", code, body, r.gw.Output())
	}
	// The answer came from the home, so its container ran; on a slow
	// machine its next idle second may have passed before this look, and
	// the container is stopped again: then a second suspend is logged once
	// the stop is proven, which can be after the container shows exited.
	again := r.e.one(t, r.name)
	if again.ID != first.ID {
		t.Fatalf("container after the second wake %+v, want %s again", again, first.ID)
	}
	if again.State != "running" {
		testbin.Eventually(t, "a second suspend of d1 logged, the container having run again", func() bool {
			return strings.Count(r.gw.Output(), "msg=suspend component=wake home=d1") >= 2
		})
	}
}

// TestGatewayRestartAdoptsContainer: a gateway killed with SIGKILL leaves
// its home's container running; the gateway started again on the same
// data adopts it (same container, not restarted) and serves through it.
// Removing the home then deletes the container.
func TestGatewayRestartAdoptsContainer(t *testing.T) {
	r := newRig(t)
	cfg := r.config("", "", "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 0s}\n")
	r.serve(t, cfg)
	if code, body := r.version(t, "d1"); code != http.StatusOK {
		t.Fatalf("first request: %d %q", code, body)
	}
	c := r.e.one(t, r.name)
	started := r.e.startedAt(t, c.ID)
	if err := r.gw.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.gw.Wait(10 * time.Second); !ok {
		t.Fatal("the gateway outlived SIGKILL")
	}
	r.serve(t, cfg)
	code, body := r.version(t, "d1")
	if code != http.StatusOK || body != "1" {
		t.Fatalf("request after the restart: %d %q\n%s", code, body, r.gw.Output())
	}
	after := r.e.one(t, r.name)
	if after.ID != c.ID || after.State != "running" || r.e.startedAt(t, after.ID) != started {
		t.Fatalf("container after the restart %+v started %s, want %s adopted as it ran since %s",
			after, r.e.startedAt(t, after.ID), c.ID, started)
	}

	// A home registered through the admin API is removed through it.
	if code, body := r.adm(t, "PUT", "/admin/homes/d2", map[string]any{"provider": "docker", "idle_timeout": "0s"}, nil); code != http.StatusCreated {
		t.Fatalf("register d2: %d %s", code, body)
	}
	if code, body := r.version(t, "d2"); code != http.StatusOK {
		t.Fatalf("d2: %d %q", code, body)
	}
	if n := len(r.e.containers(t, r.name)); n != 2 {
		t.Fatalf("%d containers, want d1's and d2's", n)
	}
	if code, body := r.adm(t, "DELETE", "/admin/homes/d2", nil, nil); code/100 != 2 {
		t.Fatalf("remove d2: %d %s", code, body)
	}
	if cs := r.e.containers(t, r.name); len(cs) != 1 || cs[0].Home != "d1" {
		t.Fatalf("containers after d2's removal: %+v, want d1's only", cs)
	}
	if nets := r.e.networks(t, r.name); len(nets) != 1 || nets[0] != r.name+"-d1" {
		t.Fatalf("networks after d2's removal: %v, want d1's only", nets)
	}
}

// TestGatewayReportsExitedContainer: a home whose container exits at
// once fails its wake as soon as it exits, not at the ready timeout; the
// public answer is a code and a sentence, and home get names the exit code
// and the container's last log lines.
func TestGatewayReportsExitedContainer(t *testing.T) {
	r := newRig(t)
	r.serve(t, r.config("", "", fmt.Sprintf("  - {id: bad, provider: docker, version: \"1\", options: {image: %q}}\n", imageBroken)))
	code, body := r.get(t, "/node/bad/")
	if code != http.StatusServiceUnavailable && code != http.StatusBadGateway {
		t.Fatalf("request to a home that exits at once: %d %q", code, body)
	}
	// home_failed: the exit ended the wake; wake_timeout would mean it
	// waited for the ready timeout instead.
	if !strings.Contains(body, `"code":"home_failed"`) || !strings.Contains(body, "request_id") {
		t.Errorf("public answer %s, want code home_failed and a request id", body)
	}
	for _, leak := range []string{r.e.host, "no-such-command", "/wakegate", imageBroken, "exit"} {
		if strings.Contains(body, leak) {
			t.Errorf("public body names %q: %s", leak, body)
		}
	}
	t.Logf("public answer: %d %s", code, body)
	c := r.e.one(t, r.name)
	if c.State != "exited" || c.Exit == "0" {
		t.Fatalf("container %+v, want exited with a code", c)
	}
	h := r.home(t, "bad")
	if !strings.Contains(h.Reason, "exited with code "+c.Exit) || !strings.Contains(h.Reason, "last log lines: ") ||
		!strings.Contains(h.Reason, "roll target") { // the end of the usage the program prints
		t.Fatalf("home get says %q (status %s), want the exit code %s and the last log lines", h.Reason, h.Status, c.Exit)
	}
}

// TestGatewayRollsContainer: an operator's roll onto target 2 makes the
// home's container again from tag 2, which serves version 2; a roll onto
// a target whose image exits at once is rolled back onto 2.
func TestGatewayRollsContainer(t *testing.T) {
	r := newRig(t)
	home := "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 0s}\n"
	r.serve(t, r.config("", "", home))
	if code, v := r.version(t, "d1"); code != http.StatusOK || v != "1" {
		t.Fatalf("version 1: %d %q", code, v)
	}
	v1 := r.e.one(t, r.name)
	r.gw.Stop()

	r.serve(t, r.config("", "roll:\n  mode: lazy\n  target: {version: \"2\"}\n", home))
	if code, body := r.adm(t, "POST", "/admin/homes/d1/roll", nil, nil); code != http.StatusOK {
		t.Fatalf("roll to 2: %d %s\n%s", code, body, r.gw.Output())
	}
	if code, v := r.version(t, "d1"); code != http.StatusOK || v != "2" {
		t.Fatalf("after the roll to 2: %d %q\n%s", code, v, r.gw.Output())
	}
	v2 := r.e.one(t, r.name)
	if v2.ID == v1.ID || v2.Version != "2" || v2.State != "running" {
		t.Fatalf("container after the roll %+v, want a new one of version 2", v2)
	}
	if h := r.home(t, "d1"); h.Version != "2" {
		t.Fatalf("home version %q after the roll", h.Version)
	}
	r.gw.Stop()

	r.serve(t, r.config("", fmt.Sprintf("roll:\n  mode: lazy\n  target: {version: \"3\", image: %q}\n", imageBroken), home))
	if code, body := r.adm(t, "POST", "/admin/homes/d1/roll", nil, nil); code == http.StatusOK {
		t.Fatalf("roll to the broken 3: %d %s, want a failure", code, body)
	}
	r.rolledBack(t, "d1", "2")
	testbin.Eventually(t, "rolled_back in the gateway's log", func() bool { return strings.Contains(r.gw.Output(), "rolled_back") })
}

// TestGatewayRestartReportsCrashedContainer: a container that died while
// no gateway ran (here killed with SIGKILL) is found at the next start
// and its home recorded failed with the exit code and the last log lines.
func TestGatewayRestartReportsCrashedContainer(t *testing.T) {
	r := newRig(t)
	cfg := r.config("", "", "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 0s}\n")
	r.serve(t, cfg)
	if code, v := r.version(t, "d1"); code != http.StatusOK || v != "1" {
		t.Fatalf("first request: %d %q", code, v)
	}
	if err := r.gw.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.gw.Wait(10 * time.Second); !ok {
		t.Fatal("the gateway outlived SIGKILL")
	}
	c := r.e.one(t, r.name)
	if _, err := r.e.podman("kill", "--signal", "KILL", c.ID); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the container is dead", func() bool { return r.e.one(t, r.name).State == "exited" })
	r.serve(t, cfg)
	testbin.Eventually(t, "the restarted gateway records the home failed", func() bool {
		return r.home(t, "d1").Status == "failed"
	})
	h := r.home(t, "d1")
	if !strings.Contains(h.Reason, "exited with code 137") || !strings.Contains(h.Reason, "listening") {
		t.Fatalf("home get says %q, want the exit code 137 and the home's last log lines", h.Reason)
	}
	// An operator's wake starts the same container again.
	if code, body := r.adm(t, "POST", "/admin/homes/d1/wake?wait=1", nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	if now := r.e.one(t, r.name); now.ID != c.ID || now.State != "running" {
		t.Fatalf("container after the wake %+v, want %s running", now, c.ID)
	}
}
