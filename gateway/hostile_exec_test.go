package gateway_test

import (
	"encoding/json"
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

	"github.com/wakegate/wakegate/internal/testbin"
)

// hostileReport is what testdata/hostile_home.py writes: what it saw and
// what each attempt got.
type hostileReport struct {
	UID        int               `json:"uid"`
	GID        int               `json:"gid"`
	Groups     []int             `json:"groups"`
	Env        map[string]string `json:"env"`
	Reads      map[string]string `json:"reads"`
	Admin      map[string]any    `json:"admin"`
	Victim     map[string]any    `json:"victim"`
	VictimAddr string            `json:"victim_addr"`
	Signals    map[string]string `json:"signals"`
	Candidates int               `json:"candidates"`
}

// hostileSecrets are the secrets the gateway holds in its environment.
var hostileSecrets = map[string]string{
	"WAKEGATE_TOKEN":     "admin-token-from-the-environment-0123",
	"HOSTILE_JWT_SECRET": "jwt-signing-secret-of-the-gateway-4567",
	"FLY_API_TOKEN":      "fly-api-token-of-the-operator-89ab",
	"VICTIM_RELAY":       "relay-token-of-the-victim-home-cdef",
}

const hostileOwnRelay = "relay-token-of-the-hostile-home-0001"

// tenantGateway is a gateway serving a victim (the demo home, behind its
// relay token) and a hostile home, run as uid (0: root).
type tenantGateway struct {
	base, data, tokenFile, adminToken string
	addr, admin                       string
	out                               *os.File
}

// startHostileGateway lays out a gateway's files as an operator would for
// a gateway running as uid, and starts it. Every path the homes need is
// passable by other users; the binary is copied out of the 0700 folder go
// test builds it in, so a home's own user may run it ({self}).
func startHostileGateway(t *testing.T, uid int) *tenantGateway {
	t.Helper()
	base := tempDirForHomeUsers(t)
	g := &tenantGateway{base: base, data: filepath.Join(base, "data"), adminToken: "admin-token-from-a-file-0123456789"}
	bin := filepath.Join(base, "bin", "wakegate")
	copyFile(t, testbin.Build(t), bin, 0o755)
	// A home runs programs from the gateway's PATH as its own user: the
	// system's python3, not one under root's home folder.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script := filepath.Join(base, "hostile_home.py")
	copyFile(t, filepath.Join("testdata", "hostile_home.py"), script, 0o644)
	secrets := filepath.Join(base, "secrets")
	g.tokenFile = filepath.Join(secrets, "admin.token")
	g.addr = fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	g.admin = fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	config := fmt.Sprintf(`
listen: %q
data_dir: %q
admin: {listen: %q, tokens: ["env:WAKEGATE_TOKEN", "file:%s"]}
server: {drain_grace: 1s}
wake: {idle_timeout: 0s}
homes:
  - id: victim
    relay_token: env:VICTIM_RELAY
  - id: hostile
    relay_token: env:HOSTILE_RELAY
    command: [%q, %q, "{port}", "{data_dir}", %q, %q, %q]
`, g.addr, g.data, g.admin, g.tokenFile, python, script, g.admin, g.data, g.tokenFile)
	cfgPath := filepath.Join(base, "config.yaml")
	for _, f := range []struct {
		path, body string
		mode       os.FileMode
	}{{cfgPath, config, 0o600}, {g.tokenFile, g.adminToken + "\n", 0o600}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(g.data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{secrets, g.tokenFile, cfgPath, g.data} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.Create(filepath.Join(base, "gateway.out"))
	if err != nil {
		t.Fatal(err)
	}
	g.out = out
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Dir = base
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOSTILE_RELAY=" + hostileOwnRelay}
	for k, v := range hostileSecrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		testbin.KillHomes(g.data)
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("gateway output:\n%s", b)
		}
		out.Close()
	})
	testbin.Eventually(t, "the gateway answers /healthz", func() bool {
		res, err := http.Get("http://" + g.addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return g
}

// tempDirForHomeUsers returns a new temporary folder that every user may
// pass (0711 up to the system's temp dir), so that homes running as users
// of their own reach a data_dir under it; it skips the test where a folder
// above the temp dir is closed to other users.
func tempDirForHomeUsers(t *testing.T) string {
	t.Helper()
	for d := filepath.Clean(os.TempDir()); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is closed to other users: homes of their own users could not reach a data_dir under it", d)
		}
		if d == "/" {
			break
		}
	}
	base := t.TempDir()
	for d := base; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// copyFile copies src to dst (made with mode), creating dst's folder 0755.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// attack wakes the victim, then the hostile home, and returns the hostile
// home's report (written before it listens, so before its wake is done).
func (g *tenantGateway) attack(t *testing.T) hostileReport {
	t.Helper()
	c := e2eClient(t)
	for _, path := range []string{"/node/victim/", "/node/hostile/"} {
		res, body := e2eGet(t, c, "http://"+g.addr+path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
	}
	b, err := os.ReadFile(filepath.Join(g.data, "homes", "hostile", "report.json"))
	if err != nil {
		t.Fatalf("no report from the hostile home: %v", err)
	}
	var rep hostileReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	t.Logf("hostile home: uid %d, %d candidate secrets; reads %v; admin %v; victim %v; signals %v",
		rep.UID, rep.Candidates, rep.Reads, rep.Admin, rep.Victim, rep.Signals)
	if rep.VictimAddr == "" {
		t.Fatal("the hostile home did not find the victim's port: the direct attempt did not run")
	}
	return rep
}

// leaks lists the gateway's secrets found in the hostile home's
// environment.
func (rep hostileReport) leaks() []string {
	var out []string
	for name, secret := range hostileSecrets {
		for k, v := range rep.Env {
			if strings.Contains(v, secret) {
				out = append(out, fmt.Sprintf("%s (as %s)", name, k))
			}
		}
	}
	return out
}

// answered lists the attempts of m (a report's admin or victim calls) that
// got a 2xx.
func answered(m map[string]any) []string {
	var out []string
	for k, v := range m {
		if code, ok := v.(float64); ok && code >= 200 && code < 300 {
			out = append(out, k)
		}
	}
	return out
}

// A hostile home under a root gateway (a user per home) tries everything:
// the gateway's secrets in its environment, the store, the admin token
// file, the other home's folder and log, the gateway's and the other
// home's /proc environ, signals to both, the admin API and the other
// home's port with whatever it found. Every attempt fails.
func TestHostileHomeUnderRootGateway(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a user per home is arranged by a root gateway")
	}
	t.Parallel()
	g := startHostileGateway(t, 0)
	rep := g.attack(t)

	if rep.UID == 0 || rep.GID != rep.UID || len(rep.Groups) != 0 {
		t.Errorf("the hostile home runs as uid %d gid %d groups %v; want a user of its own and no groups", rep.UID, rep.GID, rep.Groups)
	}
	if l := rep.leaks(); len(l) > 0 {
		t.Errorf("the gateway's secrets reached the hostile home's environment: %v", l)
	}
	if got := rep.Env["WAKEGATE_RELAY_TOKEN"]; got != hostileOwnRelay {
		t.Errorf("the hostile home's own relay token is %q, want its own", got)
	}
	for path, got := range rep.Reads {
		if !strings.HasPrefix(got, "denied") {
			t.Errorf("the hostile home reached %s: %s", path, got)
		}
	}
	if a := answered(rep.Admin); len(a) > 0 {
		t.Errorf("the admin API answered the hostile home: %v of %v", a, rep.Admin)
	}
	for _, who := range []string{"gateway", "victim"} {
		if got := rep.Signals[who]; !strings.HasPrefix(got, "denied: PermissionError") {
			t.Errorf("the hostile home may signal the %s: %q", who, got)
		}
	}
	if a := answered(rep.Victim); len(a) > 0 {
		t.Errorf("the victim home answered the hostile home directly: %v of %v", a, rep.Victim)
	}
	b, err := os.ReadFile(filepath.Join(g.data, "exec", "users.json"))
	if err != nil {
		t.Fatal(err)
	}
	var users struct {
		Homes map[string]int `json:"homes"`
	}
	if err := json.Unmarshal(b, &users); err != nil || users.Homes["hostile"] != rep.UID || users.Homes["victim"] == rep.UID || users.Homes["victim"] == 0 {
		t.Errorf("users.json %s (%v): want the hostile home's uid and another for the victim", b, err)
	}
	if out, _ := os.ReadFile(g.out.Name()); strings.Contains(string(out), "run as the gateway's own user") {
		t.Errorf("a root gateway with a user per home warns that homes share its user:\n%s", out)
	}
}

// The same hostile home under a gateway that is not root (uid 65534): the
// homes share its user. What stays protected: the gateway's secrets are
// not in the home's environment, and the gateway's /proc environ is
// closed. What is not, as documented: the store, the admin token file, the
// other home's folder and environ (so its relay token), and with them the
// admin API and the other home; signals to the gateway and the other home.
// The gateway says so at start and status warns.
func TestHostileHomeUnderUnprivilegedGateway(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the gateway as another user")
	}
	t.Parallel()
	const nobody = 65534
	g := startHostileGateway(t, nobody)
	rep := g.attack(t)

	if rep.UID != nobody {
		t.Errorf("the hostile home runs as uid %d, want the gateway's, %d", rep.UID, nobody)
	}
	if l := rep.leaks(); len(l) > 0 {
		t.Errorf("the gateway's secrets reached the hostile home's environment: %v", l)
	}
	reads := func(path string) string { return rep.Reads[path] }
	if got := reads(fmt.Sprintf("/proc/%d/environ", gatewayPID(t, g))); !strings.HasPrefix(got, "denied") {
		t.Errorf("the hostile home read the gateway's /proc environ: %s", got)
	}
	for _, path := range []string{filepath.Join(g.data, "state.db"), g.tokenFile, filepath.Join(g.data, "homes", "victim")} {
		if got := reads(path); strings.HasPrefix(got, "denied") || got == "" {
			t.Errorf("%s: %q; documented as reachable to homes of an unprivileged gateway (the test is stale?)", path, got)
		}
	}
	if rep.Signals["gateway"] != "allowed" || rep.Signals["victim"] != "allowed" {
		t.Errorf("signals %v: documented as allowed to homes of an unprivileged gateway", rep.Signals)
	}
	if len(answered(rep.Admin)) == 0 || len(answered(rep.Victim)) == 0 {
		t.Errorf("with the token file and the victim's environ readable, the admin API (%v) and the victim (%v) "+
			"answer the hostile home: documented as not protected", rep.Admin, rep.Victim)
	}
	out, _ := os.ReadFile(g.out.Name())
	if !strings.Contains(string(out), "run as the gateway's own user") || !strings.Contains(string(out), "not root") {
		t.Errorf("the gateway did not say at start that homes share its user, and why:\n%s", out)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.admin+"/admin/status", nil)
	req.Header.Set("Authorization", "Bearer "+g.adminToken)
	res, body := e2eDo(t, req)
	var st struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(body, &st); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("status: %d %s", res.StatusCode, body)
	}
	if len(warningsWith(st.Warnings, "2 exec homes run as the gateway's user")) != 1 {
		t.Errorf("status warnings %q, want one saying the 2 exec homes share the gateway's user", st.Warnings)
	}
	// Not dumpable, the gateway still reads its own /proc for its metrics.
	req, _ = http.NewRequest(http.MethodGet, "http://"+g.admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.adminToken)
	res, body = e2eDo(t, req)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "\nprocess_open_fds ") {
		t.Errorf("metrics of a gateway that is not dumpable: %d, process_open_fds missing", res.StatusCode)
	}
}

// gatewayPID is the pid of the hostile gateway: the parent of its homes.
func gatewayPID(t *testing.T, g *tenantGateway) int {
	t.Helper()
	ps, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), filepath.Join(g.base, "config.yaml")) {
			var pid int
			if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatal("gateway process not found")
	return 0
}

// e2eDo sends req and returns the response and its body.
func e2eDo(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := e2eClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}
