package execprov

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/procid"

	"github.com/wakegate/wakegate/internal/testbin"
)

// The test binary doubles as the homes it runs: with EXEC_TEST_HOME=1 in
// its environment and a mode word as first argument it becomes a tiny HTTP
// home ("home"), an idle process ("sleep") or a version command ("version").
func init() {
	if os.Getenv("EXEC_TEST_HOME") == "1" && len(os.Args) > 1 && os.Args[1] == "headless" {
		// The main goroutine stays on the main thread, which "headless"
		// ends.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("EXEC_TEST_HOME") == "1" && len(os.Args) > 1 {
		os.Exit(runHelper(os.Args[1], os.Args[2:]))
	}
	os.Exit(m.Run())
}

// helperLifetime bounds every helper process, should a test binary die
// before its cleanups run.
const helperLifetime = 2 * time.Minute

func runHelper(mode string, args []string) int {
	go func() {
		time.Sleep(helperLifetime)
		os.Exit(99)
	}()
	switch mode {
	case "home":
		return runTestHome(args)
	case "sleep":
		select {}
	case "stubborn":
		// A process left in the home's group that outlives its leader.
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "headless":
		// A stubborn process whose main thread exits while its other
		// threads run on: /proc shows it as a zombie.
		signal.Ignore(syscall.SIGTERM)
		_, _, errno := unix.Syscall(unix.SYS_EXIT, 0, 0, 0)
		fmt.Fprintf(os.Stderr, "exit of the main thread: %v\n", errno)
		return 1
	case "gateway":
		return runTestGateway(args)
	case "join":
		// Tries to move itself into process group args[0].
		pgid, err := strconv.Atoi(args[0])
		if err == nil {
			err = unix.Setpgid(0, pgid)
		}
		fmt.Println(err)
		return 0
	case "version-env":
		// What of the gateway's environment a version command sees.
		out := "clean"
		for _, k := range []string{"WAKEGATE_TOKEN", "EXEC_TEST_JWT_SECRET"} {
			if _, ok := os.LookupEnv(k); ok {
				out = "leak:" + k
			}
		}
		fmt.Printf("%s relay=%s uid=%d\n", out, os.Getenv("WAKEGATE_RELAY_TOKEN"), os.Getuid())
		return 0
	case "version":
		resp, err := http.Get(args[0] + "/version")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("  cmd:%s\n\n", b)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// runTestGateway is a gateway of its own for a test: it wakes home h1 in
// data dir args[0] with the test home, suspends it with SIGSTOP, prints
// the home's pid and waits to be killed.
func runTestGateway(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := testConfig(args[0])
	cfg.SuspendSignal = true
	e, err := New(cfg, nil)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	s := provider.Spec{ID: "h1", Version: "v1"}
	r, err := e.Wake(ctx, s)
	if err != nil {
		return fail(err)
	}
	var lastErr error
	if !testbin.Poll(15*time.Second, 20*time.Millisecond, func() bool {
		_, lastErr = get(r.Endpoint, "/version")
		return lastErr == nil
	}) {
		return fail(lastErr)
	}
	s.Ref = r.Ref
	if err := e.Suspend(ctx, s); err != nil {
		return fail(err)
	}
	ref, _ := parseRef(r.Ref)
	fmt.Println(ref.PID)
	select {}
}

// homeInfo is what a test home reports at /info.
type homeInfo struct {
	Args   []string `json:"args"`
	PID    int      `json:"pid"`
	Dir    string   `json:"dir"`
	Extra  string   `json:"extra"`
	Pgrp   int      `json:"pgrp"`
	Env    []string `json:"env"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []int    `json:"groups"`
}

// runTestHome serves /version, /info, /exit?code=N and /spew?n=BYTES on
// 127.0.0.1:-port. It records its identity in <data>/pids so the tests'
// cleanup can kill it, exits 3 at once when <data>/crash exists and
// ignores SIGTERM when <data>/ignore-term exists.
func runTestHome(args []string) int {
	fs := flag.NewFlagSet("home", flag.ContinueOnError)
	port := fs.Int("port", 0, "")
	version := fs.String("version", "", "")
	data := fs.String("data", "", "")
	fs.String("id", "", "")
	fs.String("target", "", "")
	fs.String("self", "", "")
	fs.String("mark", "", "")
	listenAfter := fs.Duration("listen-after", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if st, err := procid.ReadStat(os.Getpid()); err == nil {
		f, err := os.OpenFile(filepath.Join(*data, "pids"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%d %d\n", st.PID, st.Start)
			f.Close()
		}
	}
	if _, err := os.Stat(filepath.Join(*data, "crash")); err == nil {
		fmt.Fprintln(os.Stderr, "crashing as told")
		return 3
	}
	if _, err := os.Stat(filepath.Join(*data, "ignore-term")); err == nil {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Printf("test home listening on %d\n", *port)
	mux := http.NewServeMux()
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		if to := os.Getenv("EXEC_TEST_VERSION_REDIRECT"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprintf(w, "%s\n", *version)
	})
	mux.HandleFunc("/info", func(w http.ResponseWriter, r *http.Request) {
		dir, _ := os.Getwd()
		groups, _ := os.Getgroups()
		_ = json.NewEncoder(w).Encode(homeInfo{
			Args: os.Args, PID: os.Getpid(), Dir: dir,
			Extra: os.Getenv("EXEC_TEST_EXTRA"), Pgrp: syscall.Getpgrp(),
			Env: os.Environ(), UID: os.Getuid(), GID: os.Getgid(), Groups: groups,
		})
	})
	// /read?path=P answers P's content, or 403 with why it cannot.
	mux.HandleFunc("/read", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.URL.Query().Get("path"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		fmt.Fprintf(os.Stderr, "exiting with code %d as told\n", code)
		os.Exit(code)
	})
	mux.HandleFunc("/spew", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		line := strings.Repeat("x", 99) + "\n"
		for written := 0; written < n; written += len(line) {
			_, _ = os.Stdout.WriteString(line)
		}
		fmt.Fprintln(w, "ok")
	})
	time.Sleep(*listenAfter) // a slow boot
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, http.Serve(l, mux))
	return 1
}

// testDataDir returns a data dir whose homes are all killed (and reaped
// when they are children of the test) when the test ends, whatever
// happened. Register it before any Provider so that its cleanup runs after the
// Execs are closed.
func testDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		killHomes(t, dir)
		removeCgroups(t, dir)
	})
	return dir
}

// removeCgroups ends every process in the homes' cgroups of the provider
// with data dir dir, and removes those cgroups.
func removeCgroups(t *testing.T, dir string) {
	root, _, err := cgroup.RootPath(dir)
	if err != nil {
		return
	}
	homes, _ := filepath.Glob(filepath.Join(root, cgroup.Prefix+"*"))
	for _, h := range homes {
		if pop, _ := cgroup.Populated(h); pop {
			t.Logf("cleanup kills what is left in cgroup %s", h)
			_ = cgroup.Kill(h)
			testbin.Poll(5*time.Second, 20*time.Millisecond, func() bool {
				pop, _ := cgroup.Populated(h)
				return !pop
			})
		}
		cgroup.Remove(h)
	}
	cgroup.Remove(root)
	if _, err := os.Stat(root); err == nil {
		t.Errorf("cgroup %s is left behind", root)
	}
}

// killHomes kills every test home recorded under dir that still runs.
func killHomes(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "homes", "*", "pids"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var pid int
			var start uint64
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &pid, &start); err != nil {
				continue
			}
			killIfSame(t, pid, start)
		}
		f.Close()
	}
}

// killIfSame kills pid (and its group) if it is still the process started
// at tick start, alive or zombie, and reaps it if it is a child of the test.
func killIfSame(t *testing.T, pid int, start uint64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return
	}
	st, err := procid.ParseStat(raw)
	if err != nil || st.Start != start {
		return
	}
	if st.Pgrp == pid {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	_ = unix.Kill(pid, unix.SIGKILL)
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, 0, nil) // ECHILD when not ours
	t.Logf("cleanup killed or reaped pid %d", pid)
}

// homeCommand is the template of a test home.
var homeCommand = []string{"{self}", "home", "-port={port}", "-version={version}", "-data={data_dir}",
	"-id={id}", "-target={target}", "-self={self}"}

func testConfig(dir string) Config {
	return Config{
		Command: homeCommand,
		DataDir: dir,
		// atexit_sleep_ms: a race-enabled helper otherwise lingers 1s at exit.
		Env:       []string{"EXEC_TEST_HOME=1", "EXEC_TEST_EXTRA=hello", "GORACE=atexit_sleep_ms=0"},
		StopGrace: 3 * time.Second,
	}
}

// newExec starts a Provider that is closed when the test ends (before the
// data dir's homes are killed).
func newExec(t *testing.T, cfg Config) *Provider {
	t.Helper()
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		e.Close()
		// Homes whose start a test did not wait for have not written their
		// pids line yet: kill what this provider knows too.
		e.mu.Lock()
		var procs []*proc
		for _, h := range e.homes {
			if h.proc != nil {
				procs = append(procs, h.proc)
			}
		}
		e.mu.Unlock()
		for _, p := range procs {
			killIfSame(t, p.PID, p.Start)
		}
	})
	return e
}

// changes collects OnChange calls.
type changes struct {
	ch chan provider.Result
}

func newChanges() *changes { return &changes{ch: make(chan provider.Result, 64)} }

func (c *changes) onChange(id string, r provider.Result) { c.ch <- r }

func (c *changes) next(t *testing.T) provider.Result {
	t.Helper()
	select {
	case r := <-c.ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no OnChange call")
		return provider.Result{}
	}
}

// testClient reaches homes on ports and on sockets (internal/endpoint).
var testClient = &http.Client{Timeout: 5 * time.Second,
	Transport: &http.Transport{DialContext: endpoint.Dialer(&net.Dialer{})}}

// get fetches endpoint+path and returns the trimmed body.
func get(ep, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, endpoint.HTTP(ep)+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = endpoint.HostHeader(req.URL.Host)
	resp, err := testClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(b)), nil
}

// waitReady retries GET /version until the home answers (the provider does
// not wait for readiness; the caller probes).
func waitReady(t *testing.T, endpoint string) string {
	t.Helper()
	var v string
	testbin.Eventually(t, "the home at "+endpoint+" to answer", func() bool {
		var err error
		v, err = get(endpoint, "/version")
		return err == nil
	})
	return v
}

func info(t *testing.T, endpoint string) homeInfo {
	t.Helper()
	body, err := get(endpoint, "/info")
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	var hi homeInfo
	if err := json.Unmarshal([]byte(body), &hi); err != nil {
		t.Fatalf("info %q: %v", body, err)
	}
	return hi
}

func mustRef(t *testing.T, r provider.Result) execRef {
	t.Helper()
	ref, ok := parseRef(r.Ref)
	if !ok {
		t.Fatalf("unusable ref %q", r.Ref)
	}
	return ref
}

func wake(t *testing.T, e *Provider, s provider.Spec) provider.Result {
	t.Helper()
	r, err := e.Wake(context.Background(), s)
	if err != nil {
		t.Fatalf("Wake: %v", err)
	}
	if r.State != provider.StateRunning {
		t.Fatalf("Wake state %q, want running", r.State)
	}
	return r
}

func alive(id procid.Identity) bool {
	_, err := procid.Lookup(id)
	return err == nil
}

// running reports whether the process with id's pid and start time lives,
// whatever its executable: unlike alive, it does not go through the
// identity rules under test. It lives while one of its threads is not a
// zombie: a process whose main thread exited alone shows as a zombie in
// /proc/<pid>/stat, its other threads still running.
func running(id procid.Identity) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", id.PID))
	if err != nil {
		return false
	}
	if st, err := procid.ParseStat(raw); err != nil || st.Start != id.Start {
		return false
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", id.PID))
	for _, task := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", id.PID, task.Name()))
		if err == nil && !regexp.MustCompile(`(?m)^State:\s+[ZXx]`).Match(status) {
			return true
		}
	}
	return false
}

// exitHome tells a test home to exit with code; the request itself fails.
func exitHome(endpoint string, code int) {
	_, _ = testClient.Get(endpoint + "/exit?code=" + strconv.Itoa(code))
}

func pidLines(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "homes", id, "pids"))
	if err != nil {
		t.Fatalf("pids: %v", err)
	}
	return strings.Count(string(b), "\n")
}

func TestWakeStartsHomeOnLoopback(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	r := wake(t, e, provider.Spec{ID: "h1", Target: "alice", Version: "v1"})

	u, err := url.Parse(r.Endpoint)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
		t.Fatalf("endpoint %q is not a loopback http URL", r.Endpoint)
	}
	if v := waitReady(t, r.Endpoint); v != "v1" {
		t.Fatalf("home says version %q, want v1", v)
	}
	ref := mustRef(t, r)
	if strconv.Itoa(ref.Port) != u.Port() || ref.Version != "v1" {
		t.Fatalf("ref %+v does not match endpoint %s", ref, r.Endpoint)
	}
	hi := info(t, r.Endpoint)
	if hi.PID != ref.PID {
		t.Fatalf("home pid %d, ref pid %d", hi.PID, ref.PID)
	}
	if hi.Pgrp != hi.PID {
		t.Fatalf("home process group %d, want its own (%d)", hi.Pgrp, hi.PID)
	}
	fi, err := os.Stat(filepath.Join(dir, "homes", "h1"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home dir: %v, mode %v, want 0700", err, fi.Mode().Perm())
	}
	st, err := e.Status(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref})
	if err != nil || st.State != provider.StateRunning || st.Endpoint != r.Endpoint {
		t.Fatalf("Status = %+v, %v; want running at %s", st, err, r.Endpoint)
	}
}

// TestHomePortsOutsideEphemeralRange: a home's port is chosen below the
// kernel's ephemeral range, where no :0 listener or outgoing connection of
// another program can take it before the home binds it, and two homes
// never share one.
func TestHomePortsOutsideEphemeralRange(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	seen := map[string]string{}
	for _, id := range []string{"p1", "p2", "p3"} {
		r := wake(t, e, provider.Spec{ID: id, Target: id, Version: "v1"})
		u, err := url.Parse(r.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(u.Port())
		if p < endpoint.HomePortLow || p >= endpoint.EphemeralLow() {
			t.Errorf("home %s on port %d, want within [%d, %d)", id, p, endpoint.HomePortLow, endpoint.EphemeralLow())
		}
		if other, ok := seen[u.Port()]; ok {
			t.Errorf("homes %s and %s share port %s", other, id, u.Port())
		}
		seen[u.Port()] = id
	}
	for range 100 {
		p, err := e.freePort()
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := seen[strconv.Itoa(p)]; ok {
			t.Fatalf("port %d offered while home %s holds it", p, id)
		}
	}
}

func TestPlaceholdersSubstituted(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	r := wake(t, e, provider.Spec{ID: "ph", Target: "bob", Version: "v7"})
	waitReady(t, r.Endpoint)
	hi := info(t, r.Endpoint)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	homeDir := filepath.Join(dir, "homes", "ph")
	want := []string{self, "home", "-port=" + strconv.Itoa(mustRef(t, r).Port), "-version=v7",
		"-data=" + homeDir, "-id=ph", "-target=bob", "-self=" + self}
	if strings.Join(hi.Args, "\n") != strings.Join(want, "\n") {
		t.Fatalf("args\n%q\nwant\n%q", hi.Args, want)
	}
	if hi.Dir != homeDir {
		t.Fatalf("working dir %q, want %q", hi.Dir, homeDir)
	}
	if hi.Extra != "hello" {
		t.Fatalf("EXEC_TEST_EXTRA = %q, want the configured env", hi.Extra)
	}
}

func TestWakeAgainAdoptsSameProcess(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1"}
	r1 := wake(t, e, s)
	waitReady(t, r1.Endpoint)
	s.Ref = r1.Ref
	r2 := wake(t, e, s)
	if r2.Ref != r1.Ref || r2.Endpoint != r1.Endpoint {
		t.Fatalf("second wake %+v, first %+v", r2, r1)
	}
	if info(t, r2.Endpoint).PID != mustRef(t, r1).PID {
		t.Fatal("a different process answers")
	}
	if n := pidLines(t, dir, "h1"); n != 1 {
		t.Fatalf("%d processes started, want 1", n)
	}
}

func TestAdoptAfterGatewayRestart(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	e1 := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1"}
	r1 := wake(t, e1, s)
	waitReady(t, r1.Endpoint)
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	ref := mustRef(t, r1)
	if !alive(ref.Identity) {
		t.Fatal("Close stopped the home")
	}

	ch := newChanges()
	cfg.OnChange = ch.onChange
	e2 := newExec(t, cfg)
	s.Ref = r1.Ref
	st, err := e2.Status(context.Background(), s)
	if err != nil || st.State != provider.StateRunning || st.Ref != r1.Ref {
		t.Fatalf("Status from ref = %+v, %v; want running with the same ref", st, err)
	}
	r2 := wake(t, e2, s)
	if r2.Ref != r1.Ref || r2.Endpoint != r1.Endpoint {
		t.Fatalf("adopting wake %+v, want %+v", r2, r1)
	}
	if n := pidLines(t, dir, "h1"); n != 1 {
		t.Fatalf("%d processes started, want 1", n)
	}

	// The adopted process is watched: its death is noticed and restarted.
	exitHome(r1.Endpoint, 0)
	r3 := ch.next(t)
	if r3.State != provider.StateRunning || mustRef(t, r3).PID == ref.PID {
		t.Fatalf("OnChange %+v, want running with a new pid", r3)
	}
	waitReady(t, r3.Endpoint)

	proven, err := e2.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r3.Ref})
	if err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
	if alive(mustRef(t, r3).Identity) {
		t.Fatal("home still alive after a proven stop")
	}
}

func TestAdoptDespiteStaleRef(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	e1 := newExec(t, cfg)
	r1 := wake(t, e1, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r1.Endpoint)
	exitHome(r1.Endpoint, 0)
	r2 := ch.next(t) // a caller that does not persist this keeps r1
	waitReady(t, r2.Endpoint)
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := newExec(t, testConfig(dir))
	stale := provider.Spec{ID: "h1", Version: "v1", Ref: r1.Ref}
	st, err := e2.Status(context.Background(), stale)
	if err != nil || st.Ref != r2.Ref {
		t.Fatalf("Status with a stale ref = %+v, %v; want the restarted process", st, err)
	}
	r3 := wake(t, e2, stale)
	if r3.Ref != r2.Ref {
		t.Fatalf("wake with a stale ref = %+v, want the restarted process %+v", r3, r2)
	}
	if n := pidLines(t, dir, "h1"); n != 2 {
		t.Fatalf("%d processes started, want 2", n)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	e3 := newExec(t, testConfig(dir))
	proven, err := e3.Stop(context.Background(), stale)
	if err != nil || !proven {
		t.Fatalf("Stop with a stale ref = %v, %v", proven, err)
	}
	if alive(mustRef(t, r2).Identity) {
		t.Fatal("Stop with a stale ref left the restarted process running")
	}
}

func TestStopProvenAndGone(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	s.Ref = r.Ref
	proven, err := e.Stop(context.Background(), s)
	if err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
	if alive(mustRef(t, r).Identity) {
		t.Fatal("process alive after a proven stop")
	}
	if _, err := get(r.Endpoint, "/version"); err == nil {
		t.Fatal("endpoint still answers")
	}
	st, err := e.Status(context.Background(), s)
	if err != nil || st.State != provider.StateStopped {
		t.Fatalf("Status = %+v, %v; want stopped", st, err)
	}
	// Nothing to stop: proven, no error.
	proven, err = e.Stop(context.Background(), s)
	if err != nil || !proven {
		t.Fatalf("second Stop = %v, %v", proven, err)
	}
	select {
	case c := <-ch.ch:
		t.Fatalf("a stopped home was restarted or failed: %+v", c)
	default:
	}
	if n := pidLines(t, dir, "h1"); n != 1 {
		t.Fatalf("%d processes started, want 1", n)
	}
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.StopGrace = 300 * time.Millisecond
	e := newExec(t, cfg)
	if err := os.MkdirAll(filepath.Join(dir, "homes", "h1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "homes", "h1", "ignore-term"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref})
	if err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
	if alive(mustRef(t, r).Identity) {
		t.Fatal("process alive after a proven stop")
	}
	e.mu.Lock()
	p := e.homes["h1"].proc
	e.mu.Unlock()
	if p != nil {
		t.Fatal("stopped home still has a process")
	}

	// A ctx that has already ended changes nothing.
	r = wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if proven, err := e.Stop(ended, provider.Spec{ID: "h1", Ref: r.Ref}); proven || !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended ctx = %v, %v", proven, err)
	}
	if !alive(mustRef(t, r).Identity) {
		t.Fatal("Stop with an ended ctx signalled the home")
	}

	// A ctx that ends during the grace sends SIGKILL at once. (A second
	// gateway; the first would restart the home it still wants.)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.StopGrace = time.Minute
	e2 := newExec(t, cfg)
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if proven, err := e2.Stop(short, provider.Spec{ID: "h1", Ref: r.Ref}); proven || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a short ctx = %v, %v", proven, err)
	}
	proven, err = e2.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref})
	if err != nil || !proven {
		t.Fatalf("Stop after SIGKILL = %v, %v", proven, err)
	}
	if alive(mustRef(t, r).Identity) {
		t.Fatal("process alive after a proven stop")
	}
}

// startSleeper starts a process that is not a home, killed at cleanup.
func startSleeper(t *testing.T) procid.Stat {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "sleep")
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var st procid.Stat
	testbin.Eventually(t, "the sleeper to run this program", func() bool {
		var err error
		st, err = procid.ReadStat(cmd.Process.Pid)
		return err == nil && st.Exe == procid.CleanExe(self)
	})
	return st
}

func TestReusedPidNeverSignalled(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.SuspendSignal = true
	e := newExec(t, cfg)
	victim := startSleeper(t)

	forged := map[string]procid.Identity{
		"other start time": {PID: victim.PID, Exe: victim.Exe, Start: victim.Start + 1, Boot: victim.Boot},
		"other boot":       {PID: victim.PID, Exe: victim.Exe, Start: victim.Start, Boot: "an-earlier-boot"},
	}
	for name, id := range forged {
		t.Run(name, func(t *testing.T) {
			refJSON, err := json.Marshal(execRef{Identity: id, Port: 1, Version: "v1"})
			if err != nil {
				t.Fatal(err)
			}
			home := "forged-" + strings.ReplaceAll(name, " ", "-")
			s := provider.Spec{ID: home, Version: "v1", Ref: string(refJSON)}

			st, err := e.Status(context.Background(), s)
			if err != nil || st.State != provider.StateStopped {
				t.Fatalf("Status = %+v, %v; want stopped", st, err)
			}
			if err := e.Suspend(context.Background(), s); err == nil {
				t.Fatal("Suspend of a forged ref succeeded")
			}
			if _, err := e.Version(context.Background(), s); err == nil {
				t.Fatal("Version of a forged ref succeeded")
			}
			proven, err := e.Stop(context.Background(), s)
			if err != nil || !proven {
				t.Fatalf("Stop = %v, %v; want proven without a signal", proven, err)
			}
			r := wake(t, e, s)
			if mustRef(t, r).PID == victim.PID {
				t.Fatal("wake adopted the foreign process")
			}
			waitReady(t, r.Endpoint)
			if _, err := e.Recreate(context.Background(), provider.Spec{ID: home + "-recreate", Version: "v1", Ref: string(refJSON)}); err != nil {
				t.Fatalf("Recreate: %v", err)
			}

			vs, err := procid.ReadStat(victim.PID)
			if err != nil || vs.Start != victim.Start {
				t.Fatalf("the foreign process is gone: %v", err)
			}
			if vs.State == 'T' {
				t.Fatal("the foreign process was stopped")
			}
		})
	}
}

func TestUnexpectedExitRestarts(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	e := newExec(t, cfg)
	r1 := wake(t, e, provider.Spec{ID: "h1", Target: "alice", Version: "v1"})
	waitReady(t, r1.Endpoint)

	exitHome(r1.Endpoint, 0)
	r2 := ch.next(t)
	if r2.State != provider.StateRunning {
		t.Fatalf("OnChange state %q, want running", r2.State)
	}
	ref1, ref2 := mustRef(t, r1), mustRef(t, r2)
	if ref2.PID == ref1.PID {
		t.Fatal("restart kept the old pid")
	}
	if ref2.Version != "v1" {
		t.Fatalf("restarted with version %q, want v1", ref2.Version)
	}
	if v := waitReady(t, r2.Endpoint); v != "v1" {
		t.Fatalf("restarted home says %q", v)
	}
	st, err := e.Status(context.Background(), provider.Spec{ID: "h1"})
	if err != nil || st.Ref != r2.Ref || st.State != provider.StateRunning {
		t.Fatalf("Status = %+v, %v; want running with the new ref", st, err)
	}
	logText, err := os.ReadFile(filepath.Join(dir, "homes", "h1", "home.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logText), "exiting with code 0 as told") {
		t.Fatalf("home output not in the log:\n%s", logText)
	}
}

func TestRestartBudgetExhaustedFails(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	cfg.RestartBudget = 2
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)

	crash := filepath.Join(dir, "homes", "h1", "crash")
	if err := os.WriteFile(crash, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exitHome(r.Endpoint, 3)
	for i := 0; i < 2; i++ {
		if c := ch.next(t); c.State != provider.StateRunning {
			t.Fatalf("change %d: %+v, want a restart", i, c)
		}
	}
	failed := ch.next(t)
	if failed.State != provider.StateFailed {
		t.Fatalf("change after the budget: %+v, want failed", failed)
	}
	for _, want := range []string{"exit status 3", "crashing as told"} {
		if !strings.Contains(failed.Reason, want) {
			t.Fatalf("reason %q lacks %q", failed.Reason, want)
		}
	}
	st, err := e.Status(context.Background(), s)
	if err != nil || st.State != provider.StateFailed || st.Reason != failed.Reason {
		t.Fatalf("Status = %+v, %v; want failed with the reason", st, err)
	}
	if n := pidLines(t, dir, "h1"); n != 3 {
		t.Fatalf("%d processes started, want 3 (first start and two restarts)", n)
	}

	// An explicit wake starts it again.
	if err := os.Remove(crash); err != nil {
		t.Fatal(err)
	}
	r = wake(t, e, s)
	waitReady(t, r.Endpoint)
	st, err = e.Status(context.Background(), s)
	if err != nil || st.State != provider.StateRunning {
		t.Fatalf("Status after wake = %+v, %v; want running", st, err)
	}
}

func TestNoRestartWithNegativeBudget(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	cfg.RestartBudget = -1
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	exitHome(r.Endpoint, 5)
	c := ch.next(t)
	if c.State != provider.StateFailed || !strings.Contains(c.Reason, "exit status 5") {
		t.Fatalf("change %+v, want failed with exit status 5", c)
	}
	if n := pidLines(t, dir, "h1"); n != 1 {
		t.Fatalf("%d processes started, want 1", n)
	}
}

func TestLogCappedAndRotated(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.LogMaxBytes = 64 << 10
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	if _, err := get(r.Endpoint, "/spew?n=200000"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "homes", "h1", "home.log")
	if fi, err := os.Stat(logPath); err != nil || fi.Size() < 200000 {
		t.Fatalf("log before rotation: %v", err)
	}
	e.rotateLogs()
	old, err := os.Stat(logPath + ".1")
	if err != nil {
		t.Fatalf("no rotated log: %v", err)
	}
	if old.Size() == 0 || old.Size() > cfg.LogMaxBytes {
		t.Fatalf("home.log.1 is %d bytes, cap %d", old.Size(), cfg.LogMaxBytes)
	}
	// The home keeps appending to the truncated file, from its start.
	if _, err := get(r.Endpoint, "/spew?n=1000"); err != nil {
		t.Fatal(err)
	}
	cur, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Size() != 1000 {
		t.Fatalf("home.log is %d bytes after rotation and 1000 more, want 1000", cur.Size())
	}
	e.rotateLogs() // under the cap: nothing happens
	if again, err := os.Stat(logPath); err != nil || again.Size() != 1000 {
		t.Fatalf("log under the cap was rotated: %v", err)
	}
}

func TestVersionHTTPAndCommand(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1.2.3"})
	waitReady(t, r.Endpoint)
	v, err := e.Version(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref})
	if err != nil || v != "v1.2.3" {
		t.Fatalf("Version over HTTP = %q, %v", v, err)
	}

	cfg := testConfig(dir)
	cfg.VersionCommand = []string{"{self}", "version", "{endpoint}"}
	e1 := newExec(t, cfg)
	v, err = e1.Version(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref})
	if err != nil || v != "cmd:v1.2.3" {
		t.Fatalf("Version by command = %q, %v", v, err)
	}

	cfg.VersionCommand = []string{"{self}", "no-such-mode"}
	e2 := newExec(t, cfg)
	if v, err := e2.Version(context.Background(), provider.Spec{ID: "h1", Ref: r.Ref}); err == nil {
		t.Fatalf("failing version command gave %q", v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Version(ctx, provider.Spec{ID: "h1", Ref: r.Ref}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Version with a cancelled ctx: %v", err)
	}
	if _, err := e.Version(context.Background(), provider.Spec{ID: "never-woken"}); err == nil {
		t.Fatal("Version of a home that does not run succeeded")
	}
}

func TestRecreateWithNewVersion(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	e := newExec(t, cfg)
	r1 := wake(t, e, provider.Spec{ID: "h1", Target: "alice", Version: "v1"})
	waitReady(t, r1.Endpoint)
	keep := filepath.Join(dir, "homes", "h1", "state.db")
	if err := os.WriteFile(keep, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}

	rolled := append(append([]string(nil), homeCommand...), "-mark=rolled")
	r2, err := e.Recreate(context.Background(), provider.Spec{ID: "h1", Target: "alice", Version: "v2", Ref: r1.Ref, Command: rolled})
	if err != nil || r2.State != provider.StateRunning {
		t.Fatalf("Recreate = %+v, %v", r2, err)
	}
	if alive(mustRef(t, r1).Identity) {
		t.Fatal("old process survived the recreate")
	}
	if v := waitReady(t, r2.Endpoint); v != "v2" {
		t.Fatalf("recreated home says %q", v)
	}
	v, err := e.Version(context.Background(), provider.Spec{ID: "h1", Ref: r2.Ref})
	if err != nil || v != "v2" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	hi := info(t, r2.Endpoint)
	if hi.Args[len(hi.Args)-1] != "-mark=rolled" {
		t.Fatalf("Spec.Command not used: %q", hi.Args)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "data" {
		t.Fatalf("home data lost: %q, %v", b, err)
	}
	select {
	case c := <-ch.ch:
		t.Fatalf("recreate caused a supervisor change: %+v", c)
	default:
	}

	// The supervisor restarts the recreated home with its own command.
	exitHome(r2.Endpoint, 1)
	r3 := ch.next(t)
	if r3.State != provider.StateRunning || mustRef(t, r3).Version != "v2" {
		t.Fatalf("restart %+v, want running v2", r3)
	}
	waitReady(t, r3.Endpoint)
	if hi := info(t, r3.Endpoint); hi.Args[len(hi.Args)-1] != "-mark=rolled" {
		t.Fatalf("restart lost the command: %q", hi.Args)
	}
}

func TestSuspendAndWake(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	e0 := newExec(t, cfg)
	r0 := wake(t, e0, provider.Spec{ID: "plain", Version: "v1"})
	if err := e0.Suspend(context.Background(), provider.Spec{ID: "plain", Ref: r0.Ref}); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("Suspend without SuspendSignal: %v, want ErrUnsupported", err)
	}

	cfg.SuspendSignal = true
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	s.Ref = r.Ref
	if err := e.Suspend(context.Background(), s); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	ps, err := procid.ReadStat(mustRef(t, r).PID)
	if err != nil || ps.State != 'T' {
		t.Fatalf("process state %c, %v; want T", ps.State, err)
	}
	st, err := e.Status(context.Background(), s)
	if err != nil || st.State != provider.StateSuspended {
		t.Fatalf("Status = %+v, %v; want suspended", st, err)
	}
	if v, err := e.Version(context.Background(), s); err == nil {
		t.Fatalf("Version of a suspended home = %q", v)
	}

	r2 := wake(t, e, s)
	if r2.Ref != r.Ref {
		t.Fatalf("wake of a suspended home started another: %+v", r2)
	}
	if v := waitReady(t, r2.Endpoint); v != "v1" {
		t.Fatalf("resumed home says %q", v)
	}
	st, err = e.Status(context.Background(), s)
	if err != nil || st.State != provider.StateRunning {
		t.Fatalf("Status = %+v, %v; want running", st, err)
	}

	// A suspended home still stops.
	if err := e.Suspend(context.Background(), s); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	proven, err := e.Stop(context.Background(), s)
	if err != nil || !proven {
		t.Fatalf("Stop of a suspended home = %v, %v", proven, err)
	}

	// A restarted gateway resumes a suspended home it adopts.
	r3 := wake(t, e, provider.Spec{ID: "h2", Version: "v1"})
	waitReady(t, r3.Endpoint)
	if err := e.Suspend(context.Background(), provider.Spec{ID: "h2", Ref: r3.Ref}); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	e2 := newExec(t, cfg)
	r4 := wake(t, e2, provider.Spec{ID: "h2", Version: "v1", Ref: r3.Ref})
	if r4.Ref != r3.Ref {
		t.Fatalf("adopting wake %+v, want %+v", r4, r3)
	}
	waitReady(t, r4.Endpoint)
}

func TestConcurrentHomes(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := provider.Spec{ID: fmt.Sprintf("c%d", i), Version: "v1"}
			r, err := e.Wake(context.Background(), s)
			if err != nil {
				errs <- err
				return
			}
			s.Ref = r.Ref
			if _, err := e.Status(context.Background(), s); err != nil {
				errs <- err
			}
			if proven, err := e.Stop(context.Background(), s); err != nil || !proven {
				errs <- fmt.Errorf("stop %s: %v, %w", s.ID, proven, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestClosedProviderRefuses(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Wake(context.Background(), provider.Spec{ID: "h1"}); !errors.Is(err, errClosed) {
		t.Fatalf("Wake after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewExecValidates(t *testing.T) {
	dir := t.TempDir()
	bad := map[string]Config{
		"no command":     {DataDir: dir},
		"no data dir":    {Command: homeCommand},
		"bad env":        {Command: homeCommand, DataDir: dir, Env: []string{"NOEQUALS"}},
		"negative grace": {Command: homeCommand, DataDir: dir, StopGrace: -time.Second},
	}
	for name, cfg := range bad {
		if e, err := New(cfg, nil); err == nil {
			e.Close()
			t.Errorf("%s: New accepted it", name)
		}
	}
	e, err := New(Config{Command: homeCommand, DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.cfg.LogMaxBytes != defaultLogMaxBytes || e.cfg.StopGrace != defaultStopGrace ||
		e.cfg.RestartBudget != defaultRestartBudget || e.cfg.RestartWindow != defaultRestartWindow {
		t.Fatalf("defaults not filled: %+v", e.cfg)
	}
	if _, err := e.Wake(context.Background(), provider.Spec{ID: "../escape"}); err == nil {
		t.Fatal("a home id with a slash was accepted")
	}
}

// wrapperCommand runs the test home behind a shell that execs it, as env,
// version-manager shims and `sh -c 'exec ...'` do. The shell waits for the
// file "go" in the home's directory first, so the provider records the
// shell's executable before the exec.
var wrapperCommand = []string{"/bin/sh", "-c",
	`while [ ! -e {data_dir}/go ]; do sleep 0.01; done; exec "$0" home -port={port} -version={version} -data={data_dir} -id={id}`,
	"{self}"}

// wrapped is home h1 woken through wrapperCommand, its program exec'd and
// answering.
type wrapped struct {
	cfg Config
	e   *Provider
	s   provider.Spec // with the wake's ref
	r   provider.Result
	// now is the home's process as it runs now: another executable than
	// the recorded wrapper's.
	now procid.Stat
}

// wakeWrapped wakes home h1 through wrapperCommand, with SuspendSignal as
// suspend, lets the wrapper exec the home and waits for it to answer.
func wakeWrapped(t *testing.T, suspend bool) wrapped {
	t.Helper()
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = wrapperCommand
	cfg.SuspendSignal = suspend
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	if err := os.WriteFile(filepath.Join(dir, "homes", "h1", "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitReady(t, r.Endpoint)
	s.Ref = r.Ref
	id := mustRef(t, r).Identity
	now, err := procid.ReadStat(id.PID)
	if err != nil || now.Exe == id.Exe {
		t.Fatalf("the home did not exec: %+v, %v (recorded %s)", now, err, id.Exe)
	}
	return wrapped{cfg: cfg, e: e, s: s, r: r, now: now}
}

// TestStopOfWrappedHomeProven stops a home whose recorded executable is
// the wrapper (the shell) and whose process then exec'd the home: the stop
// signals it, is proven, and leaves nothing running.
func TestStopOfWrappedHomeProven(t *testing.T) {
	for _, suspend := range []bool{false, true} {
		t.Run(fmt.Sprintf("suspend_signal=%v", suspend), func(t *testing.T) {
			w := wakeWrapped(t, suspend)
			e, r, s := w.e, w.r, w.s
			id := mustRef(t, r).Identity
			if suspend {
				if err := e.Suspend(context.Background(), s); err != nil {
					t.Fatalf("Suspend of a wrapped home: %v", err)
				}
				if st, err := procid.ReadStat(id.PID); err != nil || st.State != 'T' {
					t.Fatalf("after Suspend the home is %+v, %v; want stopped (T)", st, err)
				}
				wake(t, e, s)
				waitReady(t, r.Endpoint)
			}
			proven, err := e.Stop(context.Background(), s)
			if err != nil || !proven {
				t.Fatalf("Stop = %v, %v; want proven", proven, err)
			}
			if running(id) {
				t.Fatal("the wrapped home runs on after a proven stop")
			}
		})
	}
}

// TestStopProvenOnlyWhenGroupGone runs a home whose leader dies at SIGTERM
// but leaves a process in its group that ignores SIGTERM: the stop is
// proven only once that process is gone too. "headless" is such a process
// whose main thread has exited, which /proc shows as a zombie while its
// other threads run on.
func TestStopProvenOnlyWhenGroupGone(t *testing.T) {
	for _, tc := range []struct {
		contain Containment
		mode    string
	}{{ContainSubreaper, "stubborn"}, {ContainSubreaper, "headless"}, {ContainAuto, "stubborn"}, {ContainAuto, "headless"}} {
		mode := tc.mode
		t.Run(string(tc.contain)+"/"+mode, func(t *testing.T) {
			dir := testDataDir(t)
			cfg := testConfig(dir)
			cfg.Containment = tc.contain
			cfg.StopGrace = 300 * time.Millisecond
			cfg.Command = []string{"/bin/sh", "-c", `"$0" ` + mode + ` & echo $! > {data_dir}/stubborn; ` +
				`exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
			e := newExec(t, cfg)
			s := provider.Spec{ID: "h1", Version: "v1"}
			r := wake(t, e, s)
			waitReady(t, r.Endpoint)
			member := groupMember(t, dir, r)
			testbin.Eventually(t, "the process to ignore SIGTERM", func() bool { return ignoresTERM(member.PID) })
			if mode == "headless" {
				testbin.Eventually(t, "the process's main thread to exit", func() bool { return headless(member.PID) })
			}
			s.Ref = r.Ref
			proven, err := e.Stop(context.Background(), s)
			if err != nil || !proven {
				t.Fatalf("Stop = %v, %v; want proven", proven, err)
			}
			if running(member.Identity) {
				t.Fatal("a proven stop left a process of the home's group running")
			}
		})
	}
}

// groupMember returns the process whose pid home h1 of r wrote to
// {data_dir}/stubborn, checked to be in the home's process group, and
// kills it when the test ends.
func groupMember(t *testing.T, dir string, r provider.Result) procid.Stat {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "homes", "h1", "stubborn"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	member, err := rawStat(pid)
	if err != nil || member.Pgrp != mustRef(t, r).PID {
		t.Fatalf("the stubborn process %+v, %v is not in the home's group", member, err)
	}
	t.Cleanup(func() { killIfSame(t, member.PID, member.Start) })
	return member
}

// rawStat reads /proc/<pid>/stat, whatever the process's state: unlike
// procid.ReadStat, it does not go through the liveness rules under test.
func rawStat(pid int) (procid.Stat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procid.Stat{}, err
	}
	st, err := procid.ParseStat(raw)
	st.PID = pid
	return st, err
}

// headless reports whether pid's main thread has exited while another
// thread runs on: /proc/<pid>/stat says zombie, with more than one thread.
func headless(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	return len(f) > 17 && f[0] == "Z" && f[17] != "1"
}

// TestStopOfChangedIdentityNotProven gives the provider a process whose
// pid now belongs to another process (another start time) that leads a
// process group: nothing is signalled and the stop is not proven.
func TestStopOfChangedIdentityNotProven(t *testing.T) {
	dir := testDataDir(t)
	e := newExec(t, testConfig(dir))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "sleep")
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	other, err := childIdentity(cmd)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.homeFor("h1")
	if err != nil {
		t.Fatal(err)
	}
	recorded := other
	recorded.Start--
	p := &proc{Identity: recorded, listenAt: listenAt{port: 1}, exited: make(chan struct{})}
	e.mu.Lock()
	h.proc, h.wanted = p, true
	e.mu.Unlock()
	proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1"})
	if proven || err == nil {
		t.Fatalf("Stop = %v, %v; want not proven, with the reason", proven, err)
	}
	if st, err := procid.ReadStat(other.PID); err != nil || st.Start != other.Start || st.State == 'T' {
		t.Fatalf("the other process was touched: %+v, %v", st, err)
	}
}

// TestCrashLeavesNoGroup runs a home whose process leaves a process in its
// group that ignores SIGTERM, and makes the home exit on its own: the
// supervisor restarts it, and what the old process left behind is gone.
func TestCrashLeavesNoGroup(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	cfg.Command = []string{"/bin/sh", "-c", `"$0" stubborn & echo $! > {data_dir}/stubborn; exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	member := groupMember(t, dir, r)
	exitHome(r.Endpoint, 3)
	if c := ch.next(t); c.State != provider.StateRunning {
		t.Fatalf("after the exit: %+v, want a restart", c)
	}
	if running(member.Identity) {
		t.Fatal("the old process's group member runs on next to its restart")
	}
}

// TestStopReportsLeftBehindGroup records a home whose process is gone but
// left a process in its group, as a gateway that was down when the home's
// leader died finds it: a stop signals nothing and is not proven.
func TestStopReportsLeftBehindGroup(t *testing.T) {
	dir := testDataDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A leader that starts a member of its group and exits at once.
	cmd := exec.Command("/bin/sh", "-c", `"$0" sleep & echo $!`, self)
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	leader, err := childIdentity(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var memberPID int
	if _, err := fmt.Fscan(out, &memberPID); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	member, err := procid.ReadStat(memberPID)
	if err != nil || member.Pgrp != leader.PID {
		t.Fatalf("member %+v, %v; want it in group %d", member, err, leader.PID)
	}
	t.Cleanup(func() { killIfSame(t, member.PID, member.Start) })
	e := newExec(t, testConfig(dir))
	ref, err := json.Marshal(execRef{Identity: leader, Port: 1, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	proven, err := e.Stop(context.Background(), provider.Spec{ID: "h1", Ref: string(ref)})
	if proven || err == nil || !strings.Contains(err.Error(), strconv.Itoa(member.PID)) {
		t.Fatalf("Stop = %v, %v; want not proven, naming the process left behind", proven, err)
	}
	if st, err := procid.ReadStat(member.PID); err != nil || st.Start != member.Start || st.State == 'T' {
		t.Fatalf("the process left behind was signalled: %+v, %v", st, err)
	}
}

// A process that exits before the wake that started it has made it the
// home's still counts: its exit is set aside and handed back once it is
// installed, and the home fails with its status instead of being probed
// until the ready timeout with nobody watching it.
func TestExitBeforeInstallIsHandled(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.Command = []string{"sh", "-c", "echo 'gone at once' >&2; exit 4"}
	cfg.OnChange = ch.onChange
	cfg.RestartBudget = -1
	e := newExec(t, cfg)
	// Hold the wake between the start and the install until the
	// supervisor has seen the exit.
	testHookAfterSpawn = func(p *proc) {
		<-p.exited
		if !testbin.Poll(20*time.Second, time.Millisecond, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return p.exitedEarly
		}) {
			t.Error("the supervisor never saw the exit")
		}
	}
	t.Cleanup(func() { testHookAfterSpawn = nil })
	if _, err := e.Wake(context.Background(), provider.Spec{ID: "h1", Version: "v1"}); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	c := ch.next(t)
	if c.State != provider.StateFailed || !strings.Contains(c.Reason, "exit status 4") || !strings.Contains(c.Reason, "gone at once") {
		t.Fatalf("change %+v, want failed with exit status 4 and the log line", c)
	}
}

// TestSuspendedHomeOutlivesItsGateway kills a gateway (in a session of its
// own, as a service manager runs it) whose home is suspended with SIGSTOP.
// The home is left for the next start to adopt, still stopped: the kernel
// sends SIGHUP and SIGCONT to a process group with a stopped member that
// loses its last parent in its session, and a home in its parent's
// session would get them, and die of SIGHUP.
func TestSuspendedHomeOutlivesItsGateway(t *testing.T) {
	dir := testDataDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gw := exec.Command(self, "gateway", dir)
	gw.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	gw.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	gw.Stderr = os.Stderr
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the gateway did not print its home's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the gateway printed %q, want a pid", line)
	}
	home, err := rawStat(pid)
	if err != nil || home.State != 'T' {
		t.Fatalf("the suspended home %+v, %v; want it stopped", home, err)
	}
	t.Cleanup(func() { killIfSame(t, home.PID, home.Start) })
	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gw.Wait()
	// The kernel sends those signals while the gateway exits, before
	// its parent can reap it; SIGCONT wakes a stopped process at once.
	if st, err := rawStat(pid); err != nil || st.Start != home.Start || st.State != 'T' {
		t.Fatalf("after its gateway died the home is %+v, %v; want it there and still stopped", st, err)
	}
}

// TestHomeCannotJoinGatewayGroup runs a home whose first process tries to
// move into the gateway's process group, where the orphan scan would take
// it for one of the gateway's own children: a home runs in a session of
// its own, and the kernel refuses a group of another session.
func TestHomeCannotJoinGatewayGroup(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{"/bin/sh", "-c", `"$0" join ` + strconv.Itoa(unix.Getpgrp()) + ` > {data_dir}/joined; ` +
		`exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	got, err := os.ReadFile(filepath.Join(dir, "homes", "h1", "joined"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != unix.EPERM.Error() {
		t.Fatalf("a home's process moving into the gateway's group: %q, want %q", got, unix.EPERM.Error())
	}
	if sid, err := unix.Getsid(mustRef(t, r).PID); err != nil || sid != mustRef(t, r).PID {
		t.Errorf("the home's session is %d, %v; want its own", sid, err)
	}
}

// TestQuickExitsArePaced: a home whose process exits soon after its start
// is restarted after a pause that doubles with each restart in the window
// (100, 200, 400 ms by default), not at once: its budget is spread over
// time for what it waits on to come up. Each pause is a lower bound on
// the time between two starts.
func TestQuickExitsArePaced(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)

	crash := filepath.Join(dir, "homes", "h1", "crash")
	if err := os.WriteFile(crash, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exited := time.Now()
	exitHome(r.Endpoint, 3)
	for i := range 3 {
		if c := ch.next(t); c.State != provider.StateRunning {
			t.Fatalf("change %d: %+v, want a restart", i, c)
		}
	}
	if c := ch.next(t); c.State != provider.StateFailed {
		t.Fatalf("change after the budget: %+v, want failed", c)
	}
	h := e.History("h1")
	if len(h) != 4 {
		t.Fatalf("history: %+v; want three restarts and the give-up", h)
	}
	prev := exited
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if got := h[i].Time.Sub(prev); got < want {
			t.Errorf("restart %d came %s after the exit before it; want a pause of at least %s", i+1, got, want)
		}
		prev = h[i].Time
	}
	logText, err := os.ReadFile(filepath.Join(dir, "homes", "h1", "home.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logText), "after its start; restarting in 400ms") {
		t.Errorf("the home's log does not name the last pause:\n%s", logText)
	}
}
