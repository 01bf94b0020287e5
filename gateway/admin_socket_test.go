package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// sockDir makes a short directory that other users may traverse (a Unix
// socket path holds 107 bytes; t.TempDir's are long and private) with a
// copy of the wakegate binary they may run.
func sockDir(t *testing.T) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "wgs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(testbin.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "wakegate")
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// sockGet sends GET path on the Unix socket at sock with host as Host and
// no token, and returns the status (0 when the connection gave no answer).
func sockGet(t *testing.T, sock, host, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: testbin.WaitLimit, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	defer c.CloseIdleConnections()
	res, err := c.Get("http://" + host + path)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// admSocket waits until gw's admin socket listens and returns its path.
func admSocket(t *testing.T, gw *e2eGateway) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	p, err := gw.g.AdminSocket(ctx)
	if err != nil {
		t.Fatalf("admin socket: %v", err)
	}
	return p
}

// asUser runs the wakegate binary bin with args as uid and gid, and
// returns its exit status and output.
func asUser(t *testing.T, bin string, uid, gid uint32, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("run as uid %d: %v\n%s", uid, err, out)
	return 0, ""
}

// TestAdminSocket serves the admin API on a Unix socket without any
// token configured and checks: the socket has mode 0600; the gateway's
// own user gets answers without a token, whatever the Host; the CLI finds
// the socket in ./data or $WAKEGATE_DATA_DIR by itself; and, as root, another user is refused
// both by the socket's mode and, with the mode opened up, by the peer
// check.
func TestAdminSocket(t *testing.T) {
	t.Parallel()
	dir, bin := sockDir(t)
	sock := filepath.Join(dir, "data", "admin.sock")
	gw := e2eStartInProcess(t, fmt.Sprintf("admin:\n  tokens: []\n  socket: %q\n", sock)+admDemo)
	if got := admSocket(t, gw); got != sock {
		t.Fatalf("AdminSocket = %q, want %q", got, sock)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode(); m&os.ModeSocket == 0 || m.Perm() != 0o600 {
		t.Errorf("socket mode %s, want a socket with 0600", m)
	}
	for _, host := range []string{"admin.sock", "evil.example", "127.0.0.1:1"} {
		if code, body := sockGet(t, sock, host, "/admin/status"); code != http.StatusOK {
			t.Errorf("own user, Host %s, no token: %d %s, want 200", host, code, body)
		}
	}
	// The CLI run from the directory above data/ finds the socket itself.
	cmd := exec.Command(bin, "status")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "demo") {
		t.Errorf("wakegate status from %s without address or token: %v\n%s", dir, err, out)
	}
	// And from anywhere, in $WAKEGATE_DATA_DIR.
	cmd = exec.Command(bin, "status")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "WAKEGATE_DATA_DIR=" + filepath.Dir(sock)}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "demo") {
		t.Errorf("wakegate status with WAKEGATE_DATA_DIR, without address or token: %v\n%s", err, out)
	}

	if os.Getuid() != 0 {
		t.Skip("refusing another user needs root to run a process as that user")
	}
	// The gateway made data/ private; open it so that only the socket's
	// own mode and the peer check stand in the way.
	if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"WAKEGATE_ADMIN=unix:" + sock}
	if code, out := asUser(t, bin, 65534, 65534, dir, env, "status"); code == 0 || strings.Contains(out, "demo") {
		t.Errorf("uid 65534 through the 0600 socket: exit %d\n%s", code, out)
	}
	// With the mode opened up, the peer check alone must refuse it.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	code, out := asUser(t, bin, 65534, 65534, dir, env, "status")
	if code == 0 || strings.Contains(out, "demo") {
		t.Errorf("uid 65534 through a 0666 socket: exit %d\n%s", code, out)
	}
	testbin.Eventually(t, "the refusal in the gateway's log", func() bool {
		return strings.Contains(gw.logs.String(), "peer_uid=65534")
	})
	if code, body := sockGet(t, sock, "admin.sock", "/admin/status"); code != http.StatusOK {
		t.Errorf("own user after the refusal: %d %s", code, body)
	}
}

// TestAdminSocketGroup gives the admin socket a group and checks a member
// of it, of another uid, may use the API, and the socket has mode 0660.
func TestAdminSocketGroup(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	dir, bin := sockDir(t)
	sock := filepath.Join(dir, "admin.sock")
	admSocket(t, e2eStartInProcess(t, fmt.Sprintf("admin:\n  tokens: []\n  socket: %q\n  socket_group: \"65534\"\n", sock)+admDemo))
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || !ok || st.Gid != 65534 {
		t.Errorf("socket mode %s, want 0660 with group 65534", fi.Mode())
	}
	env := []string{"WAKEGATE_ADMIN=unix:" + sock}
	if code, out := asUser(t, bin, 65533, 65534, dir, env, "status"); code != 0 || !strings.Contains(out, "demo") {
		t.Errorf("uid 65533 in group 65534: exit %d\n%s", code, out)
	}
}

// TestAdminListenWarnings checks an admin listener other machines can
// reach is named in the config's warnings, and a loopback one is not.
func TestAdminListenWarnings(t *testing.T) {
	t.Parallel()
	for listen, warn := range map[string]bool{
		":8081": true, "0.0.0.0:8081": true, "[::]:8081": true, "10.0.0.5:8081": true, "admin.example:8081": true,
		"127.0.0.1:8081": false, "localhost:8081": false, "[::1]:8081": false,
	} {
		cfg, err := all.Load("w.yaml", fmt.Appendf(nil, "admin:\n  listen: %q\n  tokens: [%q]\n", listen, admToken))
		if err != nil {
			t.Fatalf("%s: %v", listen, err)
		}
		ws := strings.Join(cfg.Warnings(), "\n")
		if got := strings.Contains(ws, "admin.listen"); got != warn {
			t.Errorf("admin.listen %s: warned %t, want %t: %q", listen, got, warn, ws)
		}
	}
}

// TestAdminListenWarningLogged starts a gateway whose admin listener binds
// every interface and checks the start log warns about it.
func TestAdminListenWarningLogged(t *testing.T) {
	t.Parallel()
	port := testbin.FreePort(t)
	gw := e2eStartInProcess(t, fmt.Sprintf("admin:\n  listen: \":%d\"\n  tokens: [%q]\n", port, admToken))
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	if _, err := gw.g.AdminAddr(ctx); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, fmt.Sprintf("a warning about admin.listen :%d in the log", port), func() bool {
		l := gw.logs.String()
		return strings.Contains(l, "level=WARN") && strings.Contains(l, "every interface")
	})
}
