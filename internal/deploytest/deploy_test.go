// Package deploytest checks the deployment files (fly.toml, the Dockerfile
// and deploy/fly.yaml) against each other and against the gateway's config,
// and runs the real binary with the Fly config.
package deploytest

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// flyToml is the part of fly.toml checked here.
type flyToml struct {
	App         string            `toml:"app"`
	KillSignal  string            `toml:"kill_signal"`
	KillTimeout string            `toml:"kill_timeout"`
	Processes   map[string]string `toml:"processes"`
	Env         map[string]string `toml:"env"`
	Build       struct {
		Dockerfile string `toml:"dockerfile"`
	} `toml:"build"`
	Mounts struct {
		Source      string   `toml:"source"`
		Destination string   `toml:"destination"`
		Processes   []string `toml:"processes"`
	} `toml:"mounts"`
	HTTPService struct {
		InternalPort     int     `toml:"internal_port"`
		ForceHTTPS       bool    `toml:"force_https"`
		AutoStopMachines string  `toml:"auto_stop_machines"`
		MinRunning       int     `toml:"min_machines_running"`
		Checks           []check `toml:"checks"`
	} `toml:"http_service"`
	Checks map[string]check `toml:"checks"`
}

type check struct {
	Type    string `toml:"type"`
	Port    int    `toml:"port"`
	Method  string `toml:"method"`
	Path    string `toml:"path"`
	Timeout string `toml:"timeout"`
}

func root(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func readFly(t *testing.T) flyToml {
	t.Helper()
	var f flyToml
	md, err := toml.DecodeFile(filepath.Join(root(t), "fly.toml"), &f)
	if err != nil {
		t.Fatalf("fly.toml: %v", err)
	}
	// Keys this test does not model are fine; a misspelt known key is not.
	for _, k := range md.Undecoded() {
		if s := k.String(); !strings.HasPrefix(s, "http_service.concurrency") && !strings.HasPrefix(s, "primary_region") &&
			!strings.Contains(s, "grace_period") && !strings.Contains(s, "interval") && !strings.HasPrefix(s, "http_service.auto_start") &&
			!strings.HasPrefix(s, "http_service.processes") && !strings.HasSuffix(s, ".processes") {
			t.Errorf("fly.toml: key %s is not checked by this test", s)
		}
	}
	return f
}

// dockerfile is a parsed Dockerfile: instructions with their arguments,
// continuation lines joined, comments dropped.
type dockerfile []instr

type instr struct {
	cmd  string // upper case: FROM, COPY, ...
	args string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out dockerfile
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trim := strings.TrimSpace(line)
		if cur == "" && (trim == "" || strings.HasPrefix(trim, "#")) {
			continue
		}
		if strings.HasSuffix(trim, "\\") {
			cur += strings.TrimSuffix(trim, "\\") + " "
			continue
		}
		cur += trim
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

// final returns the instructions of the last stage.
func (d dockerfile) final() dockerfile {
	last := 0
	for i, in := range d {
		if in.cmd == "FROM" {
			last = i
		}
	}
	return d[last:]
}

func (d dockerfile) all(cmd string) []string {
	var out []string
	for _, in := range d {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

func (d dockerfile) one(t *testing.T, cmd string) string {
	t.Helper()
	v := d.all(cmd)
	if len(v) != 1 {
		t.Fatalf("Dockerfile: want one %s in the final stage, got %q", cmd, v)
	}
	return v[0]
}

// execForm decodes a JSON exec form such as ["a", "b"].
func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("Dockerfile: %s %s: want the exec form (no shell in the image): %v", what, s, err)
	}
	return v
}

// flyConfig loads deploy/fly.yaml through the gateway's loader, with the
// environment fly.toml sets.
func flyConfig(t *testing.T, f flyToml) *config.Config {
	t.Helper()
	for k, v := range f.Env {
		t.Setenv(k, v)
	}
	cfg, err := all.LoadFile(filepath.Join(root(t), "deploy", "fly.yaml"))
	if err != nil {
		t.Fatalf("deploy/fly.yaml: %v", err)
	}
	return cfg
}

func port(t *testing.T, listen string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	n, err := net.LookupPort("tcp", p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFlyTomlMatchesConfig: fly.toml, the Dockerfile and deploy/fly.yaml
// agree on ports, the data volume, health paths, the stop signal and the
// shutdown timeouts.
func TestFlyTomlMatchesConfig(t *testing.T) {
	f := readFly(t)
	d := readDockerfile(t)
	cfg := flyConfig(t, f)
	fin := d.final()

	// The process: fly.toml runs the Fly config, which the image carries.
	cmd := strings.Fields(f.Processes["app"])
	if len(cmd) != 3 || cmd[0] != "serve" || cmd[1] != "--config" {
		t.Fatalf("fly.toml processes.app = %q, want serve --config FILE", f.Processes["app"])
	}
	if !slices.Contains(fin.all("COPY"), "deploy/fly.yaml "+cmd[2]) {
		t.Errorf("Dockerfile does not copy deploy/fly.yaml to %s (COPY %q)", cmd[2], fin.all("COPY"))
	}
	if f.Build.Dockerfile != "Dockerfile" {
		t.Errorf("fly.toml build.dockerfile = %q", f.Build.Dockerfile)
	}

	// Ports: the gateway listens where Fly's proxy and checks connect.
	p := port(t, cfg.Listen)
	if f.HTTPService.InternalPort != p {
		t.Errorf("http_service.internal_port %d, the gateway listens on %d", f.HTTPService.InternalPort, p)
	}
	if got := fin.one(t, "EXPOSE"); got != strconv.Itoa(p) {
		t.Errorf("Dockerfile EXPOSE %s, the gateway listens on %d", got, p)
	}

	// State survives deploys: the data dir is the volume.
	if f.Mounts.Source == "" || filepath.Clean(f.Mounts.Destination) != filepath.Clean(cfg.DataDir) {
		t.Errorf("[mounts] %s at %q; the gateway keeps its state in %q", f.Mounts.Source, f.Mounts.Destination, cfg.DataDir)
	}
	for _, env := range fin.all("ENV") {
		if v, ok := envValue(env, "WAKEGATE_DATA_DIR"); ok && v != f.Mounts.Destination {
			t.Errorf("Dockerfile ENV WAKEGATE_DATA_DIR=%s, the volume is at %s", v, f.Mounts.Destination)
		}
	}

	// Health: Fly's proxy routes by /readyz (a draining gateway gets no new
	// requests); liveness and the image's own check ask /healthz.
	if !hasCheck(f.HTTPService.Checks, "/readyz", 0) {
		t.Errorf("http_service.checks %+v: want GET /readyz", f.HTTPService.Checks)
	}
	var live []check
	for _, c := range f.Checks {
		live = append(live, c)
	}
	if !hasCheck(live, "/healthz", p) {
		t.Errorf("checks %+v: want an http check of /healthz on port %d", f.Checks, p)
	}
	_, hcCmd, _ := strings.Cut(fin.one(t, "HEALTHCHECK"), " CMD ")
	hc := execForm(t, "HEALTHCHECK", strings.TrimSpace(hcCmd))
	entry := execForm(t, "ENTRYPOINT", fin.one(t, "ENTRYPOINT"))
	if len(hc) < 2 || hc[0] != entry[0] || hc[1] != "healthcheck" || !slices.Contains(hc, "/healthz") {
		t.Errorf("HEALTHCHECK %q: want %s healthcheck ... /healthz", hc, entry[0])
	}

	// Stopping: one signal everywhere, and time for the whole drain.
	if f.KillSignal != "SIGTERM" || fin.one(t, "STOPSIGNAL") != f.KillSignal {
		t.Errorf("kill_signal %s, STOPSIGNAL %s: want SIGTERM, which serve drains on", f.KillSignal, fin.one(t, "STOPSIGNAL"))
	}
	kill, err := time.ParseDuration(f.KillTimeout)
	if err != nil {
		t.Fatalf("kill_timeout %q: %v", f.KillTimeout, err)
	}
	// After the drain, local (exec) homes are stopped: up to twice
	// exec.stop_grace (a term, then a kill).
	if need := cfg.Server.DrainDelay + cfg.Server.DrainGrace + 2*cfg.Exec.StopGrace; kill <= need || kill > 300*time.Second {
		t.Errorf("kill_timeout %s: want above drain_delay + drain_grace + twice exec.stop_grace (%s) and at most Fly's 300s", kill, need)
	}
	if cfg.Server.DrainDelay <= 0 {
		t.Errorf("server.drain_delay %s: Fly's proxy needs time to see /readyz fail", cfg.Server.DrainDelay)
	}

	// The edge: HTTPS forced at Fly's proxy, whose headers are trusted.
	if !f.HTTPService.ForceHTTPS || f.HTTPService.AutoStopMachines != "off" || f.HTTPService.MinRunning < 1 {
		t.Errorf("http_service %+v: want force_https, auto_stop_machines off, at least one machine", f.HTTPService)
	}
	if len(cfg.Server.TrustedProxies) == 0 || !strings.EqualFold(cfg.Access.ClientIPHeader, "Fly-Client-Ip") {
		t.Errorf("trusted_proxies %v, client_ip_header %q: want Fly's proxy trusted for Fly-Client-Ip",
			cfg.Server.TrustedProxies, cfg.Access.ClientIPHeader)
	}
}

func envValue(env, key string) (string, bool) {
	for _, kv := range strings.Fields(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return strings.Trim(v, `"`), true
		}
	}
	return "", false
}

func hasCheck(cs []check, path string, port int) bool {
	for _, c := range cs {
		if c.Path == path && (c.Method == "" || strings.EqualFold(c.Method, "GET")) && (port == 0 || c.Port == port) {
			return true
		}
	}
	return false
}

// TestDockerfileIsStaticAndUnprivileged: two stages, a static build, a
// distroless final image whose gateway runs as a non-root user (USER, or
// WAKEGATE_USER, which it becomes once data_dir is that user's).
func TestDockerfileIsStaticAndUnprivileged(t *testing.T) {
	d := readDockerfile(t)
	froms := d.all("FROM")
	if len(froms) < 2 {
		t.Fatalf("FROM %q: want a build stage and a final stage", froms)
	}
	if !strings.Contains(froms[len(froms)-1], "distroless/static") {
		t.Errorf("final FROM %s: want a distroless static base", froms[len(froms)-1])
	}
	var built bool
	for _, run := range d.all("RUN") {
		built = built || (strings.Contains(run, "CGO_ENABLED=0") && strings.Contains(run, "go build"))
	}
	if !built {
		t.Error("no RUN builds with CGO_ENABLED=0: the binary must be static for distroless/static")
	}
	// Either the image runs as a non-root user, or it starts as root only
	// to give data_dir to the user WAKEGATE_USER names, and becomes it.
	user := ""
	if users := d.final().all("USER"); len(users) > 0 {
		user = users[len(users)-1]
	}
	if u, _, _ := strings.Cut(user, ":"); u == "0" || u == "root" || u == "" {
		runAs := ""
		for _, env := range d.final().all("ENV") {
			for _, f := range strings.Fields(strings.ReplaceAll(env, "\\", " ")) {
				if v, ok := strings.CutPrefix(f, "WAKEGATE_USER="); ok {
					runAs = v
				}
			}
		}
		if u, _, _ := strings.Cut(runAs, ":"); u == "0" || u == "root" || u == "" {
			t.Errorf("USER %q and WAKEGATE_USER %q: want the gateway to run as a non-root user", user, runAs)
		}
	}
	entry := execForm(t, "ENTRYPOINT", d.final().one(t, "ENTRYPOINT"))
	var copied bool
	for _, c := range d.final().all("COPY") {
		copied = copied || strings.HasSuffix(c, " "+entry[0])
	}
	if !copied {
		t.Errorf("ENTRYPOINT %s is not what the final stage copies in", entry[0])
	}
}

// TestFlyConfigServes runs the real binary with deploy/fly.yaml: behind a
// trusted proxy the home sees the client's address from Fly-Client-Ip and
// the scheme https; from anywhere else those headers are dropped; the
// healthcheck command passes while serving; on SIGTERM /readyz turns 503
// (so Fly's proxy moves traffic away) and the gateway exits by itself.
func TestFlyConfigServes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "fly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := strings.NewReplacer(`"${WAKEGATE_LISTEN:-:8080}"`, `"%ADDR%"`, `"${WAKEGATE_DATA_DIR:-/data}"`, `"%DATA%"`).Replace(string(b))
	if !strings.Contains(base, "%ADDR%") || !strings.Contains(base, "%DATA%") || !strings.Contains(base, `["172.16.0.0/16"]`) {
		t.Fatal("deploy/fly.yaml changed its listen, data_dir or trusted_proxies lines; update this test")
	}
	for _, tc := range []struct {
		name       string
		trusted    string
		wantIP     string
		wantScheme string
	}{
		{"behind Fly's proxy", `["127.0.0.1"]`, "203.0.113.7", "https"},
		{"from elsewhere", `["172.16.0.0/16"]`, "127.0.0.1", "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testbin.ServeEnv(t, t.TempDir(), nil, strings.Replace(base, `["172.16.0.0/16"]`, tc.trusted, 1))
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/node/demo/whoami", nil)
			req.Header.Set("Fly-Client-Ip", "203.0.113.7")
			req.Header.Set("X-Forwarded-For", "203.0.113.7")
			req.Header.Set("X-Forwarded-Proto", "https")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var who struct {
				Headers http.Header `json:"headers"`
			}
			if err := json.NewDecoder(res.Body).Decode(&who); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("whoami: %d, %v", res.StatusCode, err)
			}
			if got := who.Headers.Get("X-Forwarded-Proto"); got != tc.wantScheme {
				t.Errorf("the home saw X-Forwarded-Proto %q, want %q", got, tc.wantScheme)
			}
			if got := who.Headers.Get("X-Real-Ip"); got != tc.wantIP {
				t.Errorf("the home saw X-Real-Ip %q, want %q", got, tc.wantIP)
			}
			if tc.wantIP != "203.0.113.7" && who.Headers.Get("Fly-Client-Ip") != "" {
				t.Errorf("an untrusted Fly-Client-Ip reached the home: %q", who.Headers.Get("Fly-Client-Ip"))
			}
			if tc.trusted == `["172.16.0.0/16"]` {
				drains(t, p)
			}
		})
	}
}

// drains checks the healthcheck command and the drain on SIGTERM.
func drains(t *testing.T, p *testbin.Proc) {
	t.Helper()
	hc := func(path string) int {
		c := testbin.Start(t, t.TempDir(), nil, "healthcheck", "--addr", p.Addr, "--path", path)
		err, ok := c.Wait(30 * time.Second)
		if !ok {
			t.Fatal("healthcheck did not return")
		}
		if err == nil {
			return 0
		}
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			return ee.ExitCode()
		}
		t.Fatalf("healthcheck: %v", err)
		return -1
	}
	if code := hc("/healthz"); code != 0 {
		t.Fatalf("healthcheck of a serving gateway exited %d", code)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "/readyz answering 503 while draining", func() bool {
		res, err := http.Get("http://" + p.Addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusServiceUnavailable
	})
	if code := hc("/readyz"); code != 1 {
		t.Errorf("healthcheck --path /readyz of a draining gateway exited %d, want 1", code)
	}
	f := readFly(t)
	kill, _ := time.ParseDuration(f.KillTimeout)
	if err, ok := p.Wait(kill); !ok || err != nil {
		t.Fatalf("after SIGTERM the gateway did not exit cleanly within kill_timeout %s: exited %t, %v", kill, ok, err)
	}
}

// TestDockerignoreKeepsStateOut: the build context leaves out .git and
// the gateway's local state (./data, with state.db), and keeps what the
// Dockerfile copies and builds from.
func TestDockerignoreKeepsStateOut(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), ".dockerignore"))
	if err != nil {
		t.Fatalf("no .dockerignore: `COPY . .` would send .git and ./data into the build: %v", err)
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	// ignored reports whether path, or a folder above it, matches a
	// pattern (the rule Docker applies to a context path).
	ignored := func(path string) bool {
		for p := path; p != "." && p != "/"; p = filepath.Dir(p) {
			for _, pat := range patterns {
				if ok, _ := filepath.Match(strings.TrimPrefix(pat, "**/"), p); ok {
					return true
				}
				if strings.HasPrefix(pat, "**/") {
					if ok, _ := filepath.Match(strings.TrimPrefix(pat, "**/"), filepath.Base(p)); ok {
						return true
					}
				}
			}
		}
		return false
	}
	for _, p := range []string{".git/HEAD", "data/state.db", "data/homes/h1/home.log"} {
		if !ignored(p) {
			t.Errorf("%s is sent into the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "main.go", "config.yaml", "deploy/fly.yaml", "cli/cli.go", "web/dashboard.js"} {
		if ignored(p) {
			t.Errorf("%s is left out of the build context, which needs it", p)
		}
	}
}

// TestInstallAndReleaseAgree: `go install github.com/wakegate/wakegate@latest`
// (the README's) works only while the module has that path, its main
// package at the root and no replace directive (go install refuses one);
// the release build sets the same version variable the Dockerfile does.
func TestInstallAndReleaseAgree(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root(t), name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gomod, readme, main := read("go.mod"), read("README.md"), read("main.go")
	if !strings.HasPrefix(gomod, "module github.com/wakegate/wakegate\n") {
		t.Errorf("go.mod's module path is not github.com/wakegate/wakegate")
	}
	for _, line := range strings.Split(gomod, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "replace") {
			t.Errorf("go.mod has a replace directive, which go install ...@latest refuses: %s", line)
		}
	}
	if !strings.Contains(readme, "go install github.com/wakegate/wakegate@latest") {
		t.Error("the README does not say how to install the binary")
	}
	if !strings.HasPrefix(main, "// Command wakegate") || !strings.Contains(main, "\npackage main\n") || !strings.Contains(main, "var version = ") {
		t.Error("main.go is not the main package with a version variable")
	}
	rel := read(".goreleaser.yaml")
	for _, want := range []string{"main: .", "CGO_ENABLED=0", "-X main.version={{ .Version }}"} {
		if !strings.Contains(rel, want) {
			t.Errorf(".goreleaser.yaml lacks %q", want)
		}
	}
	if !strings.Contains(read("Dockerfile"), "-X main.version=") {
		t.Error("the Dockerfile does not set main.version")
	}
}
