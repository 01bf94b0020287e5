package gateway_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// execHomeRef is the part of an exec home's record (data_dir/exec/<id>/home.ref)
// the tests read: the pid of its process.
type execHomeRef struct {
	PID int `json:"pid"`
}

// homePID is the pid of exec home id's process, from its record.
func homePID(t *testing.T, data, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "exec", id, "home.ref"))
	if err != nil {
		t.Fatalf("home %s's record: %v", id, err)
	}
	var ref execHomeRef
	if err := json.Unmarshal(b, &ref); err != nil || ref.PID == 0 {
		t.Fatalf("home %s's record %s: %v", id, b, err)
	}
	return ref.PID
}

// procUID is the real uid of process pid, from /proc/<pid>/status.
func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(v)[0])
			if err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return 0
}

// wakeOK wakes home target through the gateway at addr and wants a 200.
func wakeOK(t *testing.T, addr, target string) {
	t.Helper()
	res, body := e2eGet(t, e2eClient(t), "http://"+addr+"/node/"+target+"/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /node/%s/: %d %s", target, res.StatusCode, body)
	}
}

// homesdirBin is where a root gateway copies a {self} other users cannot run.
const homesdirBin = "/var/lib/wakegate/bin/"

// closedAbove reports whether a folder above path is closed to other users.
// startServing starts cmd, a gateway serving at addr with data_dir data,
// and waits until it answers /healthz; at the test's end it is stopped,
// its homes ended, and its output logged when the test failed. It
// returns the gateway's output.
func startServing(t *testing.T, cmd *exec.Cmd, data, addr string) *testbin.SyncBuffer {
	t.Helper()
	out := &testbin.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		testbin.KillHomes(data)
		if t.Failed() {
			t.Logf("gateway output:\n%s", out.String())
		}
	})
	testbin.Eventually(t, "the gateway answers /healthz", func() bool {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return out
}

func closedAbove(path string) bool {
	for d := filepath.Dir(path); d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o001 == 0 {
			return true
		}
	}
	return false
}

// README's first command as root: `go run . serve` builds wakegate in a
// folder only root may pass (the {self} of the demo home) and the checkout
// (so data_dir) sits under a folder closed to other users. The demo home
// still runs as a user of its own, and cannot read the store.
func TestGoRunLayoutRunsTheDemoHomeAsItsOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the case is a root gateway")
	}
	t.Parallel()
	// The binary in a folder only root may pass, as go run builds it, and
	// data_dir in a 0700 folder, as a checkout under /root is.
	base := t.TempDir() // 0700
	bin := filepath.Join(base, "go-build", "exe", "wakegate")
	copyFile(t, testbin.Build(t), bin, 0o755)
	if err := os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "checkout", "data")
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	cfgPath := filepath.Join(base, "checkout", "config.yaml")
	config := fmt.Sprintf("listen: %q\ndata_dir: %q\nadmin: {listen: \"\"}\nhomes:\n  - id: demo\n    target: demo\n    version: \"1\"\n", addr, data)
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Dir = filepath.Dir(cfgPath)
	out := startServing(t, cmd, data, addr)
	for _, p := range []string{data, bin} {
		if !closedAbove(p) {
			t.Fatalf("no folder above %s is closed to other users; the test needs one", p)
		}
	}
	wakeOK(t, addr, "demo")
	pid := homePID(t, data, "demo")
	uid := procUID(t, pid)
	if uid == 0 {
		t.Fatalf("the demo home (pid %d) runs as root", pid)
	}
	cat := exec.Command("/bin/cat", filepath.Join(data, "state.db"))
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	if out, err := cat.CombinedOutput(); err == nil {
		t.Errorf("the demo home's user (uid %d) read state.db (%d bytes)", uid, len(out))
	}
	if log := out.String(); strings.Contains(log, "as the gateway's own user") || strings.Contains(log, "run as root") ||
		!strings.Contains(log, "{self} runs as "+homesdirBin) {
		t.Errorf("the gateway says homes share its user, or not that it runs a copy of {self}:\n%s", log)
	}
}

// A gateway started with a descriptor open that it was not meant to pass
// on (a shell's `exec 9<secret`, here a 0600 root file) hands it to no
// home: a home holds stdio only, and its listening socket under socket
// activation.
func TestHomeInheritsNoDescriptor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a home of its own user is what must not read the file")
	}
	t.Parallel()
	base := tempDirForHomeUsers(t)
	data := filepath.Join(base, "data")
	secret := filepath.Join(base, "secret")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	script := filepath.Join(base, "fds_home.py")
	copyFile(t, filepath.Join("testdata", "fds_home.py"), script, 0o644)
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	config := fmt.Sprintf(`
listen: %q
data_dir: %q
admin: {listen: ""}
homes:
  - id: plain
    command: ["/usr/bin/python3", %q, "{port}"]
    probe: http
  - id: activated
    socket_activation: true
    probe: http
    command: ["/usr/bin/python3", %q, "{port}"]
`, addr, data, script, script)
	cfgPath := filepath.Join(base, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Build(t), "serve", "--config", cfgPath)
	cmd.Dir = base
	cmd.ExtraFiles = []*os.File{f} // descriptor 3 of the gateway, not close-on-exec
	startServing(t, cmd, data, addr)
	for home, want := range map[string][]string{"plain": {"0", "1", "2"}, "activated": {"0", "1", "2", "3"}} {
		wakeOK(t, addr, home)
		b, err := os.ReadFile(filepath.Join(data, "homes", home, "fds.json"))
		if err != nil {
			t.Fatal(err)
		}
		var fds map[string]string
		if err := json.Unmarshal(b, &fds); err != nil {
			t.Fatalf("fds.json %s: %v", b, err)
		}
		got := slices.Sorted(maps.Keys(fds))
		if !slices.Equal(got, want) {
			t.Errorf("home %s holds descriptors %v, want %v", home, fds, want)
		}
		if home == "activated" && !strings.HasPrefix(fds["3"], "socket:") {
			t.Errorf("home %s's descriptor 3 is %q, want its listening socket", home, fds["3"])
		}
	}
}

// A fork bomb in one home (bounded: at most 2000 forks or 60 s) stops at
// the home's process cap, while another home serves 100 requests, all
// 200; stopping the gateway then leaves none of the bomb's processes.
func TestForkBombStopsAtTheHomesProcessCap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a process cap per home needs a cgroup or a uid of its own")
	}
	t.Parallel()
	base := tempDirForHomeUsers(t)
	script := filepath.Join(base, "forkbomb_home.py")
	copyFile(t, filepath.Join("testdata", "forkbomb_home.py"), script, 0o644)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	const pidsCap = 64
	p := testbin.ServeIn(t, base, fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
admin: {listen: ""}
wake: {idle_timeout: 0s}
homes:
  - id: demo
    target: demo
    version: "1"
  - id: bomb
    command: ["/usr/bin/python3", %q, "{port}", "{data_dir}"]
    probe: http
    options: {pids_max: %d}
`, script, pidsCap))
	data := filepath.Join(base, "data")
	wakeOK(t, p.Addr, "bomb")
	b, err := os.ReadFile(filepath.Join(data, "homes", "bomb", "bomb.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Forked int    `json:"forked"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("bomb.json %s: %v", b, err)
	}
	t.Logf("the bomb forked %d processes, then: %s", got.Forked, got.Error)
	if got.Forked >= pidsCap || got.Error == "" {
		t.Errorf("the bomb forked %d processes (%q); want a fork refused below its cap of %d", got.Forked, got.Error, pidsCap)
	}
	uid := procUID(t, homePID(t, data, "bomb"))
	c := e2eClient(t)
	for i := range 100 {
		res, body := e2eGet(t, c, "http://"+p.Addr+"/node/demo/", nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("request %d to the other home: %d %s", i, res.StatusCode, body)
		}
	}
	p.Stop()
	testbin.Eventually(t, "no process of the bomb's uid is left", func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, pr := range procs {
			st, err := os.Stat(pr)
			if err == nil && int(st.Sys().(*syscall.Stat_t).Uid) == uid && uid != 0 {
				return false
			}
		}
		return true
	})
}

// Homes run as root only when the config says so (exec.users.mode off),
// and then the start log says it, with the way back.
func TestUsersOffUnderRootIsSaid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the case is a root gateway")
	}
	t.Parallel()
	gw := e2eStartInProcess(t, `  users: {mode: "off"}
homes:
  - id: demo
`)
	testbin.Eventually(t, "the start log says the homes run as root", func() bool {
		return strings.Contains(gw.logs.String(), `msg="exec homes run as root`) &&
			strings.Contains(gw.logs.String(), "set exec.users.mode auto")
	})
}
