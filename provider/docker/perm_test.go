package docker_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
)

// permHelperEnv makes the test binary, run again as another user, be the
// client of TestEnginePermissionDenied.
const permHelperEnv = "WAKEGATE_DOCKER_PERM_SOCK"

// TestEnginePermissionDenied: a socket the gateway's user may not open is
// refused, with a hint about the socket's group, not "start the engine".
// Under root, which every socket lets in, the test runs itself again as
// nobody.
func TestEnginePermissionDenied(t *testing.T) {
	if sock := os.Getenv(permHelperEnv); sock != "" {
		permClient(t, sock)
		return
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		permClient(t, sock)
		return
	}
	// Root: copy this test binary where nobody may run it, and run it so.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "docker.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if d == os.TempDir() {
			break
		}
		_ = os.Chmod(d, 0o755) // the test's own temp folders
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^TestEnginePermissionDenied$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), permHelperEnv+"="+sock)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// permClient wakes a home on sock, which it may not open.
func permClient(t *testing.T, sock string) {
	p, err := docker.New(docker.Config{Host: "unix://" + sock, Image: "x:{version}"}, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	_, err = p.Wake(ctx(t), provider.Spec{ID: "h", Version: "1"})
	pe, ok := provider.AsError(err)
	if !ok || pe.Reason != provider.ReasonRefused || !strings.Contains(pe.Hint, "group") {
		t.Fatalf("wake on a socket the user may not open: %v (%+v)", err, pe)
	}
}
