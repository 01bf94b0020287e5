// Package testbin builds the wakegate binary once per test process and runs
// it as a real gateway or demo home on loopback, for end-to-end tests.
package testbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/endpoint"

	"github.com/wakegate/wakegate/internal/homesdir"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Main runs a package's tests and then removes the binary Build made, so a
// test run leaves no build behind. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if buildPath != "" {
		_ = os.RemoveAll(filepath.Dir(buildPath))
	}
	return code
}

// Build compiles the wakegate binary (once per test process) and returns
// its path, in a folder every user may pass (0711) but not list. Main removes it when the package's tests are done.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "wakegate-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// Other users may run it: a root gateway's homes run {self} (and a
		// command naming this path) as users of their own.
		if err := os.Chmod(dir, 0o711); err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "wakegate")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// FreePort returns a loopback port that was free a moment ago. It is
// picked between 10000 and 20000: below the kernel's ephemeral range, from
// which every outgoing connection and every :0 listener of the tests
// running beside this one take their ports (a port from that range can be
// taken between this call and the listen that uses it), and below the
// ports the exec provider gives its homes.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := 10000, min(endpoint.HomePortLow, endpoint.EphemeralLow())
	for range 500 {
		p := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			_ = ln.Close()
			return p
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Proc is a running wakegate process.
type Proc struct {
	Cmd  *exec.Cmd
	Addr string // host:port of the public listener (serve only)
	out  *SyncBuffer
	done chan struct{}
	err  error
}

// Output returns what the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits for the process to exit, up to d; it reports the exit error
// and whether it exited in time.
func (p *Proc) Wait(d time.Duration) (error, bool) {
	select {
	case <-p.done:
		return p.err, true
	case <-time.After(d):
		return nil, false
	}
}

// Stop sends SIGTERM and waits up to 30 s, then kills.
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	if _, ok := p.Wait(30 * time.Second); !ok {
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Start runs the binary with args in dir and stops it when the test ends.
func Start(t testing.TB, dir string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Build(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %v:\n%s", args, out.String())
		}
	})
	return p
}

// Serve writes config (a YAML text; %ADDR% and %DATA% are replaced with a
// free loopback address and a temp data dir) and runs `wakegate serve`,
// waiting until /healthz answers. Homes started by the gateway are killed
// when the test ends.
func Serve(t testing.TB, config string) *Proc {
	t.Helper()
	dir := t.TempDir()
	return ServeIn(t, dir, config)
}

// ServeIn is Serve with a chosen working directory (to restart a gateway on
// the same data).
func ServeIn(t testing.TB, dir, config string) *Proc {
	t.Helper()
	return ServeEnv(t, dir, nil, config)
}

// ServeEnv is ServeIn with extra KEY=VALUE entries added to the gateway's
// environment (homes it starts inherit them).
//
// The gateway's port is one that was free a moment before it starts, so
// a test running beside this one may take it first: then the gateway
// exits with the address in use, and that other process may answer
// /healthz in its stead. So the answer counts only once the listening
// socket is the gateway's own, and a gateway that lost its port is
// started again on another, up to three times.
func ServeEnv(t testing.TB, dir string, env []string, config string) *Proc {
	t.Helper()
	// Registered before Start so that it runs after the gateway has
	// stopped: a gateway still running would restart the killed homes.
	t.Cleanup(func() { KillHomes(filepath.Join(dir, "data")) })
	path := filepath.Join(dir, "config.yaml")
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cfg := replaceAll(config, map[string]string{"%ADDR%": addr, "%DATA%": filepath.Join(dir, "data")})
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := Start(t, dir, env, "serve", "--config", path)
		p.Addr = addr
		err := waitServing(p, port)
		if err == nil {
			return p
		}
		if attempt < 3 && strings.Contains(p.Output(), "address already in use") {
			p.Stop()
			continue
		}
		t.Fatalf("%v\n%s", err, p.Output())
	}
}

// waitServing waits until p, whose public listener is on 127.0.0.1:port,
// answers /healthz 200 on a socket of its own.
func waitServing(p *Proc, port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Addr+"/healthz", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK && listensOn(p.Cmd.Process.Pid, port) {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("gateway exited: %v", p.err)
		case <-ctx.Done():
			return errors.New("gateway did not answer /healthz in time")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listensOn reports whether process pid holds the socket that listens on
// 127.0.0.1:port (/proc/net/tcp names its inode; the process's
// descriptors name the inodes they hold).
func listensOn(pid, port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true // nothing to check with: trust the answer
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	inode := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // 0A: listening
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}

// KillHomes kills every process whose working directory is under dataDir
// or under its home folders in the machine-wide folder of root gateways
// (homesdir.Of), the home processes an exec provider started there (a
// gateway that was killed, or that ran with
// exec.keep_running_on_shutdown, leaves them running), and everything in
// the cgroups of those homes, which it removes, and then those home
// folders.
func KillHomes(dataDir string) {
	defer removeHomeCgroups(dataDir)
	moved := ""
	if abs, err := filepath.Abs(dataDir); err == nil {
		moved = homesdir.Of(homesdir.DefaultMachineDir, abs)
		defer func() { _ = os.RemoveAll(moved) }()
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		if cwd == dataDir || hasPrefixDir(cwd, dataDir) || (moved != "" && hasPrefixDir(cwd, moved)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func hasPrefixDir(p, dir string) bool {
	return len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}

func replaceAll(s string, m map[string]string) string {
	for k, v := range m {
		s = string(bytes.ReplaceAll([]byte(s), []byte(k), []byte(v)))
	}
	return s
}

// SyncBuffer is a bytes.Buffer that goroutines may write and read at once
// (a logger's output read by a test).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
