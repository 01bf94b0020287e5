package faultinject

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/internal/testbin"
)

// Shared helpers of the fault-injection tests. The binary is built once per
// test run (testbin.Build); each gateway runs in a temp dir of its own with
// a config written there, and its log is captured.

// fiHome and fiTarget name the one demo home of fiConfig.
const (
	fiHome   = "h1"
	fiTarget = "alice"
	// fiWhoami is a path on the demo home that answers 200 once it runs.
	fiWhoami = "/node/" + fiTarget + "/whoami"
)

// fiOptions shape a gateway config; the zero value is one exec demo home
// (h1 at /node/alice) with a 200ms boot, a 10s ready timeout, no idle
// suspend and no admin listener.
type fiOptions struct {
	boot  string         // the demo home's --boot-delay
	args  []string       // extra demo-home arguments
	wake  map[string]any // overrides under wake:
	exec  map[string]any // overrides under exec: (command included)
	home  map[string]any // overrides of the home
	extra map[string]any // more top-level sections (server:, admin:, ...)
	// admin turns the admin listener on at %ADMIN% with fiToken.
	admin bool
}

// fiToken is the admin token of a gateway started with fiOptions.admin.
const fiToken = "faultinject-admin-token-0123456789"

// fiConfig returns the YAML config for o, with %ADDR%, %ADMIN% and %DATA%
// left for fiWriteConfig to fill.
func fiConfig(t testing.TB, o fiOptions) string {
	t.Helper()
	if o.boot == "" {
		o.boot = "200ms"
	}
	cmd := append([]string{testbin.Build(t), "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
		"--version", "{version}", "--boot-delay", o.boot}, o.args...)
	w := map[string]any{"warm_ttl": "1m", "ready_timeout": "10s", "wake_timeout": "20s", "hold": "5s",
		"idle_timeout": "0s", "retry_after": "2s"}
	for k, v := range o.wake {
		w[k] = v
	}
	x := map[string]any{"command": cmd, "stop_grace": "2s"}
	for k, v := range o.exec {
		x[k] = v
	}
	h := map[string]any{"id": fiHome, "target": fiTarget}
	for k, v := range o.home {
		h[k] = v
	}
	cfg := map[string]any{
		"listen": "%ADDR%", "data_dir": "%DATA%", "instance": "fi",
		"log":    map[string]any{"format": "text", "level": "info", "access": false},
		"server": map[string]any{"drain_grace": "2s"},
		"wake":   w,
		"exec":   x,
		"homes":  []any{h},
	}
	if o.admin {
		cfg["admin"] = map[string]any{"listen": "%ADMIN%", "tokens": []string{fiToken}}
	}
	for k, v := range o.extra {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fiGateway is one run of the real binary in dir.
type fiGateway struct {
	*testbin.Proc
	dir    string // working directory; the config is dir/config.yaml
	data   string // data_dir: dir/data
	config string // the config file's path
	url    string // http://host:port of the public listener
	admin  string // http://host:port of the admin listener ("" when off)
}

// fiWriteConfig fills config's placeholders with free loopback addresses
// and dir/data, writes it to dir/config.yaml and returns the gateway it
// describes, not yet started.
func fiWriteConfig(t testing.TB, dir, config string) *fiGateway {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	g := &fiGateway{dir: dir, data: filepath.Join(dir, "data"), config: filepath.Join(dir, "config.yaml"),
		url: "http://" + addr}
	if strings.Contains(config, "%ADMIN%") {
		g.admin = "http://" + adminAddr
	}
	config = strings.NewReplacer("%ADDR%", addr, "%ADMIN%", adminAddr, "%DATA%", g.data).Replace(config)
	if err := os.WriteFile(g.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// Registered before any start, so it runs after every gateway of the
	// test has stopped: a running gateway would restart killed homes.
	t.Cleanup(func() { testbin.KillHomes(g.data) })
	return g
}

// fiStart writes config into dir (see fiWriteConfig), runs `wakegate serve`
// with it and waits until /readyz answers 200. The gateway is stopped when
// the test ends.
func fiStart(t testing.TB, dir, config string, args ...string) *fiGateway {
	t.Helper()
	g := fiWriteConfig(t, dir, config)
	g.start(t, args...)
	return g
}

// start runs `wakegate serve` on g's config (again, for a restart) and
// waits until /readyz answers 200.
func (g *fiGateway) start(t testing.TB, args ...string) {
	t.Helper()
	g.Proc = testbin.Start(t, g.dir, nil, append([]string{"serve", "--config", g.config}, args...)...)
	if err, exited := g.awaitReady(t); exited {
		t.Fatalf("gateway exited before /readyz: %v\n%s", err, g.Output())
	}
}

// awaitReady waits until g's /readyz answers 200, and fails the test if
// that takes longer than testbin.WaitLimit. exited is true (with the exit
// error) when the gateway exited instead.
func (g *fiGateway) awaitReady(t testing.TB) (err error, exited bool) {
	t.Helper()
	deadline := time.Now().Add(testbin.WaitLimit)
	for {
		res, err := http.Get(g.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil, false
			}
		}
		if err, done := g.Wait(20 * time.Millisecond); done {
			return err, true
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not answer /readyz\n%s", g.Output())
		}
	}
}

// fiRun runs the binary with args in dir until it exits (up to
// testbin.WaitLimit) and returns its exit status and everything it printed.
func fiRun(t testing.TB, dir string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Build(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("wakegate %v did not exit in time\n%s", args, out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("wakegate %v: %v\n%s", args, err, out)
	return 0, ""
}

// kill ends the gateway at once with SIGKILL, as a crash would: nothing of
// its shutdown runs, and its homes keep running.
func (g *fiGateway) kill(t testing.TB) {
	t.Helper()
	if err := g.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, done := g.Wait(testbin.WaitLimit); !done {
		t.Fatal("gateway did not die on SIGKILL")
	}
}

// stop ends the gateway with SIGTERM and waits for its shutdown.
func (g *fiGateway) stop(t testing.TB) {
	t.Helper()
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, done := g.Wait(testbin.WaitLimit); !done {
		t.Fatalf("gateway did not stop on SIGTERM\n%s", g.Output())
	}
}

// homeDir is the directory of home id under the gateway's data_dir: the
// working directory of its process. data_dir/homes is a link when the
// gateway keeps its homes' folders elsewhere (a data_dir other users
// cannot pass): the process's working directory is the link's target.
func (g *fiGateway) homeDir(id string) string {
	homes := filepath.Join(g.data, "homes")
	if real, err := filepath.EvalSymlinks(homes); err == nil {
		homes = real
	}
	return filepath.Join(homes, id)
}

// homePIDs returns the live processes of home id.
func (g *fiGateway) homePIDs(t testing.TB, id string) []int {
	t.Helper()
	return testbin.HomePIDs(t, g.homeDir(id))
}

// get sends GET path to the public listener with client c.
func (g *fiGateway) get(c *http.Client, path string) (*http.Response, string, error) {
	res, err := c.Get(g.url + path)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

// adminDo sends an admin API request with the admin token and returns its
// status and body.
func (g *fiGateway) adminDo(t testing.TB, method, path string) (int, string) {
	t.Helper()
	if g.admin == "" {
		t.Fatal("the admin listener is off (fiOptions.admin)")
	}
	req, err := http.NewRequest(method, g.admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fiToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// noPanic fails the test when out shows a Go panic or a fatal runtime error.
func noPanic(t testing.TB, out string) {
	t.Helper()
	for _, sign := range []string{"panic:", "goroutine ", "fatal error:", "SIGSEGV"} {
		if strings.Contains(out, sign) {
			t.Fatalf("the output shows a crash (%q):\n%s", sign, out)
		}
	}
}
