package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry"
)

const unixHomeRelay = "relay-token-of-the-socket-home-0042"

// unixHomeGateway serves, in process, one exec home "sock" run by the real
// demo home on {socket}. As root the home runs as a user of its own
// (users mode dynamic, which fails rather than falls back), so the paths
// it needs are opened to other users as an operator would.
func unixHomeGateway(t *testing.T) (*e2eGateway, string) {
	t.Helper()
	base := t.TempDir()
	users := "off"
	if os.Geteuid() == 0 {
		users = "dynamic"
		for d := filepath.Clean(os.TempDir()); d != "/"; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o001 == 0 {
				t.Skipf("%s is closed to other users: a home of its own user could not reach its folder", d)
			}
		}
		for d := base; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	bin := filepath.Join(base, "bin", "wakegate")
	copyFile(t, testbin.Build(t), bin, 0o755)
	relay := filepath.Join(base, "relay.token")
	if err := os.WriteFile(relay, []byte(unixHomeRelay+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "data")
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
exec:
  command: [%q, "demo-home", "--unix", "{socket}", "--target", "{target}"]
  users: {mode: %s}
server: {drain_grace: 1s}
wake: {idle_timeout: 0s}
homes:
  - id: sock
    relay_token: "file:%s"
`, data, bin, users, relay)
	cfg, err := all.Load("unix.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	return e2eServe(t, g, ln, data, logs), filepath.Join(data, "homes", "sock", ".wakegate.sock")
}

// TestUnixSocketHomeThroughGateway wakes a home listening on {socket}
// through the gateway with a GET, a POST with a body and a WebSocket echo,
// suspends it and wakes it again; the home never had a port.
func TestUnixSocketHomeThroughGateway(t *testing.T) {
	t.Parallel()
	gw, sock := unixHomeGateway(t)
	c := e2eClient(t)
	base := "http://" + gw.addr + "/node/sock"

	_, who, _ := e2eGetWhoami(t, c, base+"/whoami", nil)
	if who.Host != gw.addr {
		t.Errorf("the home saw Host %q, want the client's %s", who.Host, gw.addr)
	}
	st, err := os.Lstat(sock)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v, mode %v", sock, err, st)
	}
	if os.Geteuid() == 0 {
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
			t.Errorf("the socket belongs to root; want the home's own user, who made it")
		}
	}
	if log := homeLogOf(t, gw.data, "sock"); !strings.Contains(log, " on socket "+sock+",") {
		t.Errorf("the home's log does not say it was started on its socket:\n%s", log)
	}
	if hs, err := gw.g.Engine().HomeState(context.Background(), "sock"); err != nil || !hs.Warm || hs.Endpoint != "unix://"+sock {
		t.Errorf("warm home state %+v (%v), want the endpoint unix://%s", hs, err, sock)
	}
	if got := homeEnvOf(t, gw.data, "sock"); strings.Contains(got, "WAKEGATE_PORT=") || !strings.Contains(got, "WAKEGATE_SOCKET="+sock) {
		t.Errorf("the home's environment names a port or not its socket:\n%s", got)
	}

	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	res, err := c.Post(base+"/whoami", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var posted struct {
		Method    string `json:"method"`
		BodyBytes int64  `json:"body_bytes"`
	}
	err = json.NewDecoder(res.Body).Decode(&posted)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || posted.Method != http.MethodPost || posted.BodyBytes != int64(len(body)) {
		t.Fatalf("POST: %d %+v (%v), want 200 with %d body bytes", res.StatusCode, posted, err, len(body))
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/sock/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	e2eHello(t, conn, "sock")
	e2eEcho(t, conn, websocket.TextMessage, []byte("through the socket"))
	e2eEcho(t, conn, websocket.BinaryMessage, bytes.Repeat([]byte{7}, 70000))
	conn.Close()
	testbin.Eventually(t, "the WebSocket session to end", func() bool { return gw.g.Sessions().Count("sock") == 0 })

	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	if err := gw.g.Engine().Suspend(ctx, "sock"); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	hs, err := gw.g.Engine().HomeState(ctx, "sock")
	if err != nil || hs.Warm || hs.Status != registry.StatusSuspended {
		t.Fatalf("after suspend: %+v (%v)", hs, err)
	}
	if hs.Endpoint != "unix://"+sock {
		t.Errorf("recorded endpoint %q, want unix://%s", hs.Endpoint, sock)
	}
	_, who, _ = e2eGetWhoami(t, c, base+"/whoami?again=1", nil)
	if who.RawQuery != "again=1" {
		t.Fatalf("woken again: %+v", who)
	}
}

// homeLogOf is home id's log, in its folder or, when homes have users of
// their own, in the gateway's folder for it.
func homeLogOf(t *testing.T, data, id string) string {
	t.Helper()
	for _, p := range []string{filepath.Join(data, "exec", id, "home.log"), filepath.Join(data, "homes", id, "home.log")} {
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
	}
	t.Fatalf("no log of home %s", id)
	return ""
}

// homeEnvOf is the environment of home id's running process, read from
// /proc through the pid the exec provider's ref names.
func homeEnvOf(t *testing.T, data, id string) string {
	t.Helper()
	for _, pid := range testbin.HomePIDs(t, filepath.Join(data, "homes", id)) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(b, []byte("WAKEGATE_HOME="+id+"\x00")) {
			return strings.ReplaceAll(string(b), "\x00", "\n")
		}
	}
	t.Fatalf("no process of home %s found", id)
	return ""
}

// TestUnixSocketHomeClosedToOtherUsers connects to a home's socket as
// another user (uid 65534): refused, where the same attempt as the
// gateway's user succeeds.
func TestUnixSocketHomeClosedToOtherUsers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// The system's python3: one under root's home folder is closed to
	// the other user.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3 for the other user's client")
	}
	gw, sock := unixHomeGateway(t)
	e2eGetWhoami(t, e2eClient(t), "http://"+gw.addr+"/node/sock/whoami", nil)

	const connect = `import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("refused", e.errno)
    sys.exit(3)
print("connected")
`
	try := func(uid uint32) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "-c", connect, sock)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
		}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := try(0); err != nil || out != "connected" {
		t.Fatalf("as root: %q (%v); the client itself does not work", out, err)
	}
	out, err := try(65534)
	if err == nil || !strings.HasPrefix(out, "refused") {
		t.Fatalf("as uid 65534: %q (%v), want refused", out, err)
	}
	if !strings.Contains(out, fmt.Sprint(int(syscall.EACCES))) {
		t.Errorf("as uid 65534: %q, want EACCES (permission denied)", out)
	}
	// The gateway keeps reaching the home.
	e2eGetWhoami(t, e2eClient(t), "http://"+gw.addr+"/node/sock/whoami", nil)
}
