package docker_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
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

	"github.com/wakegate/wakegate/internal/testbin"
)

// The tests run a real Podman service on a socket in a temp folder, with
// its own storage there and the project's containers.conf, so that they
// touch nothing of the machine's and leave nothing behind. One service
// serves the whole package: each test names its gateway differently, so
// their containers never meet.

// Images the engine holds for the tests.
const (
	imageRepo   = "localhost/wakegate-home"
	imageBroken = imageRepo + ":broken" // its program exits at once
)

// engine is the package's Podman service.
type engine struct {
	dir  string   // everything of the engine's: storage, socket, images
	host string   // unix://…/podman.sock
	args []string // podman's global flags for this storage
	env  []string // CONTAINERS_CONF
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	engineOnce sync.Once
	theEngine  *engine
	engineSkip string // why the tests cannot run an engine here
	engineErr  error
)

// TestMain stops the engine and removes its storage after the tests.
func TestMain(m *testing.M) {
	before := hostPortChains()
	code := testbin.Main(m)
	if theEngine != nil {
		theEngine.close()
		dropHostPortChains(before)
	}
	os.Exit(code)
}

// hostPortChains lists netavark's per-network host-port chains in the nat
// table (none without iptables or root).
func hostPortChains() map[string]bool {
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	chains := map[string]bool{}
	if err != nil {
		return chains
	}
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "-N "); ok && strings.HasPrefix(name, "NETAVARK-DN-") {
			chains[name] = true
		}
	}
	return chains
}

// dropHostPortChains removes the host-port chains made since before, with
// the jumps to them, once the package's engine and its containers are
// gone: a rule a container's teardown left behind would send loopback
// connections to its old port (which any later process may listen on) to
// an address nobody answers.
func dropHostPortChains(before map[string]bool) {
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "NETAVARK-HOSTPORT-DNAT").Output()
	if err != nil {
		return
	}
	drop := map[string]bool{}
	for name := range hostPortChains() {
		if !before[name] {
			drop[name] = true
		}
	}
	// The jumps go by their number, last first, so that each deletion
	// leaves the numbers of the ones still to go as they were.
	var jumps []int
	n := 0
	for _, rule := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(rule, "-A ") {
			continue
		}
		n++
		if i := strings.LastIndex(rule, "-j "); i >= 0 && drop[rule[i+3:]] {
			jumps = append(jumps, n)
		}
	}
	for i := len(jumps) - 1; i >= 0; i-- {
		_ = exec.Command("iptables", "-w", "-t", "nat", "-D", "NETAVARK-HOSTPORT-DNAT", strconv.Itoa(jumps[i])).Run()
	}
	for name := range drop {
		_ = exec.Command("iptables", "-w", "-t", "nat", "-F", name).Run()
		_ = exec.Command("iptables", "-w", "-t", "nat", "-X", name).Run()
	}
	left := len(drop)
	if left > 0 {
		fmt.Fprintf(os.Stderr, "provider/docker: removed %d host-port chains the engine left behind\n", left)
	}
}

// podman returns the package's engine, starting it and importing the test
// images on first use. It skips the test where podman cannot run.
func podman(t *testing.T) *engine {
	t.Helper()
	engineOnce.Do(func() { theEngine, engineSkip, engineErr = startEngine() })
	if engineSkip != "" {
		t.Skip(engineSkip)
	}
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return theEngine
}

// confPath is the project's containers.conf for these machines.
func confPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "containers.conf")
}

func startEngine() (*engine, string, error) {
	skip := func(why string) (*engine, string, error) {
		if os.Getenv("CI") == "true" {
			return nil, "", errors.New(why + " (CI=true: not skipped)")
		}
		return nil, why, nil
	}
	if _, err := exec.LookPath("podman"); err != nil {
		return skip("podman is not installed (scripts/test.sh installs it: apt-get install -y podman runc)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return skip("runc is not installed (scripts/test.sh installs it: apt-get install -y runc)")
	}
	if os.Geteuid() != 0 {
		return skip("the podman tests run the engine as root (rootless podman needs subuid ranges this machine may lack)")
	}
	dir, err := os.MkdirTemp("", "wakegate-podman-")
	if err != nil {
		return nil, "", err
	}
	e := &engine{dir: dir, host: "unix://" + filepath.Join(dir, "podman.sock"),
		args: []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
			"--tmpdir", filepath.Join(dir, "tmp")},
		env: []string{"CONTAINERS_CONF=" + confPath()}}
	if err := e.images(); err != nil {
		e.close()
		return nil, "", err
	}
	e.cmd = exec.Command("podman", append(e.args, "system", "service", "--time=0", e.host)...)
	e.cmd.Env = append(os.Environ(), e.env...)
	// A test binary killed by its timeout takes the service with it.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out strings.Builder
	e.cmd.Stdout, e.cmd.Stderr = &out, &out
	if err := e.cmd.Start(); err != nil {
		e.close()
		return nil, "", fmt.Errorf("podman system service: %w", err)
	}
	e.done = make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(e.done) }()
	c := &http.Client{Transport: unixTransport(filepath.Join(dir, "podman.sock")), Timeout: time.Second}
	for i := 0; ; i++ {
		res, err := c.Get("http://engine/_ping")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return e, "", nil
			}
		}
		select {
		case <-e.done:
			e.close()
			return nil, "", fmt.Errorf("podman system service exited: %s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if i > 300 {
			e.close() // stops the service: its output is complete
			return nil, "", fmt.Errorf("podman system service did not answer in 15s: %s", out.String())
		}
	}
}

// podman runs the podman command on the engine's storage.
func (e *engine) podman(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append(append([]string{}, e.args...), args...)...)
	cmd.Env = append(os.Environ(), e.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// images builds wakegate and the tests' probe (testdata/probe) without
// cgo into an otherwise empty root file system and imports it as the test
// images: tags 1, 2 and 3 run wakegate, tag broken runs a command it does
// not know.
func (e *engine) images() error {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(e.dir, "build", "wakegate")
	probe := filepath.Join(e.dir, "build", "probe")
	for _, b := range [][2]string{{bin, "."}, {probe, "./provider/docker/testdata/probe"}} {
		build := exec.Command("go", "build", "-o", b[0], b[1])
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s (CGO_ENABLED=0): %w\n%s", b[1], err, out)
		}
	}
	rootfs := filepath.Join(e.dir, "rootfs.tar")
	if err := tarFiles(rootfs, [2]string{bin, "wakegate"}, [2]string{probe, "probe"}); err != nil {
		return err
	}
	for _, tag := range []string{"1", "2", "3"} {
		if _, err := e.podman("import", "--change", `ENTRYPOINT ["/wakegate"]`, rootfs, imageRepo+":"+tag); err != nil {
			return err
		}
	}
	_, err := e.podman("import", "--change", `ENTRYPOINT ["/wakegate", "no-such-command"]`, rootfs, imageBroken)
	return err
}

// tarFiles writes a tar at path holding each file {src, name} as name
// (mode 0755), with /tmp beside them.
func tarFiles(path string, files ...[2]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}); err != nil {
		return err
	}
	for _, sf := range files {
		data, err := os.ReadFile(sf[0])
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: sf[1], Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// close removes every container and image, stops the service and deletes
// the engine's storage.
func (e *engine) close() {
	_, _ = e.podman("rm", "--all", "--force", "--time", "0")
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			_ = e.cmd.Process.Kill()
			<-e.done
		}
	}
	_, _ = e.podman("system", "reset", "--force")
	_ = os.RemoveAll(e.dir)
}

// containers lists the containers of gateway name as id, state, exit
// code and home label.
func (e *engine) containers(t *testing.T, name string) []ctr {
	t.Helper()
	ids, err := e.podman("ps", "--all", "--quiet", "--no-trunc", "--filter", "label=wakegate.gateway="+name)
	if err != nil {
		t.Fatal(err)
	}
	if ids == "" {
		return nil
	}
	out, err := e.podman(append([]string{"inspect", "--format",
		`{{.Id}}|{{.State.Status}}|{{.State.ExitCode}}|{{index .Config.Labels "wakegate.home"}}|{{index .Config.Labels "wakegate.version"}}`},
		strings.Fields(ids)...)...)
	if err != nil {
		t.Fatal(err)
	}
	var cs []ctr
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Split(strings.TrimSpace(l), "|"); len(f) == 5 {
			cs = append(cs, ctr{ID: f[0], State: f[1], Exit: f[2], Home: f[3], Version: f[4]})
		}
	}
	return cs
}

// startedAt is when container ref last started.
func (e *engine) startedAt(t *testing.T, ref string) string {
	t.Helper()
	out, err := e.podman("inspect", "--format", "{{.State.StartedAt}}", ref)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ctr is one container as podman ps lists it.
type ctr struct{ ID, State, Exit, Home, Version string }

// one returns the only container of gateway name, failing otherwise.
func (e *engine) one(t *testing.T, name string) ctr {
	t.Helper()
	cs := e.containers(t, name)
	if len(cs) != 1 {
		t.Fatalf("containers of %s: %+v, want one", name, cs)
	}
	return cs[0]
}

// cleanup removes gateway name's containers when the test ends.
func (e *engine) cleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		for _, c := range e.containers(t, name) {
			_, _ = e.podman("rm", "--force", "--time", "0", c.ID)
		}
	})
}
