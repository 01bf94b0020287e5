package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// readmeRecipes returns the YAML blocks of README.md that follow a
// `<!-- recipe: NAME -->` line, by name.
func readmeRecipes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- recipe: ([a-z-]+) -->\n```yaml\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	for _, name := range []string{"app", "home", "websocket", "socket", "activated", "activated-demo"} {
		if out[name] == "" {
			t.Fatalf("README.md has no recipe %q", name)
		}
	}
	return out
}

// recipeServe runs `wakegate serve` on a recipe as README.md writes it,
// with only its listen address (127.0.0.1:8080) moved to a free port and
// the replacements in repl applied, and returns the gateway's base URL.
func recipeServe(t *testing.T, recipe string, repl ...string) (*testbin.Proc, string) {
	t.Helper()
	if !strings.Contains(recipe, "listen: 127.0.0.1:8080\n") {
		t.Fatalf("recipe does not listen on 127.0.0.1:8080:\n%s", recipe)
	}
	cfg := strings.Replace(recipe, "listen: 127.0.0.1:8080\n", "listen: \"%ADDR%\"\n", 1)
	cfg = strings.NewReplacer(repl...).Replace(cfg)
	dir := t.TempDir()
	gw := testbin.ServeEnv(t, dir, []string{"WAKEGATE_TOKEN="}, cfg)
	return gw, "http://" + gw.Addr
}

// recipeGet GETs url and returns the status and body.
func recipeGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// recipePython is a folder with one file for http.server to list.
func recipePython(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte("the report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRecipeApp runs recipe 1: a Python HTTP server that is already
// running, as an app.
func TestRecipeApp(t *testing.T) {
	dir := recipePython(t)
	port := testbin.FreePort(t)
	py := exec.Command("python3", "-m", "http.server", fmt.Sprint(port), "--bind", "127.0.0.1")
	py.Dir = dir
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = py.Process.Kill(); _ = py.Wait() })
	_, base := recipeServe(t, readmeRecipes(t)["app"], "http://127.0.0.1:8000", fmt.Sprintf("http://127.0.0.1:%d", port))
	testbin.Eventually(t, "the app to serve the server's file", func() bool {
		code, body := recipeGet(t, base+"/apps/files/report.txt")
		return code == http.StatusOK && body == "the report\n"
	})
}

// TestRecipeHome runs recipe 2: a Python HTTP server as a home that
// sleeps, reached through its app with the default auto probe, in its
// home folder (the command's working directory).
func TestRecipeHome(t *testing.T) {
	recipePython(t)
	gw, base := recipeServe(t, readmeRecipes(t)["home"])
	start := time.Now()
	code, body := recipeGet(t, base+"/apps/files/")
	woke := time.Since(start)
	if code != http.StatusOK || !strings.Contains(body, "Directory listing") {
		t.Fatalf("first request: %d %q\n%s", code, body, gw.Output())
	}
	t.Logf("first request, with the wake: %v", woke)
	// The wake's line is logged once its callers have their answer, so it
	// may come just after the response.
	testbin.Eventually(t, "a ready wake in the log", func() bool { return strings.Contains(gw.Output(), "outcome=ready") })
	code, _ = recipeGet(t, base+"/apps/files/")
	if code != http.StatusOK {
		t.Fatalf("second request: %d", code)
	}
}

// TestRecipeWebSocket runs recipe 3: the demo home as a WebSocket
// service at /node/chat/ws.
func TestRecipeWebSocket(t *testing.T) {
	recipe := readmeRecipes(t)["websocket"]
	_, base := recipeServe(t, recipe)
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/node/chat/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, hello, err := conn.ReadMessage()
	if err != nil || !strings.Contains(string(hello), `"hello":"chat"`) {
		t.Fatalf("hello %q: %v", hello, err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, echo, err := conn.ReadMessage(); err != nil || string(echo) != "ping" {
		t.Fatalf("echo %q: %v", echo, err)
	}
}

// TestRecipeSocket runs the socket variant of recipe 3: the demo home on
// a Unix socket in its folder, reached through the gateway over HTTP and
// WebSocket with Host: localhost.
func TestRecipeSocket(t *testing.T) {
	recipe := readmeRecipes(t)["socket"]
	_, base := recipeServe(t, recipe)
	status, body := recipeGet(t, base+"/node/chat/whoami")
	if status != http.StatusOK || !strings.Contains(body, `"host":"localhost"`) {
		t.Fatalf("GET whoami: %d %s", status, body)
	}
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/node/chat/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, hello, err := conn.ReadMessage(); err != nil || !strings.Contains(string(hello), `"hello":"chat"`) {
		t.Fatalf("hello %q: %v", hello, err)
	}
}

// TestRecipeActivated runs recipe 4, a Python home that serves the socket
// it is handed, and its demo home variant, each booting 300 ms before it
// serves: the first request is answered, and the wake's probe passed at
// its first attempt, its request having waited in the socket's accept
// queue rather than been refused. Each attempt may last a minute, so that
// a home slow to start on a loaded machine still answers the first one; a
// home that bound its port itself would refuse it at once.
func TestRecipeActivated(t *testing.T) {
	recipePython(t)
	for name, c := range map[string]struct{ boot, path, want string }{
		"activated":      {`import http.server, socket`, "/apps/files/", "Directory listing"},
		"activated-demo": {`"--target", "{target}"`, "/node/chat/", "chat"},
	} {
		t.Run(name, func(t *testing.T) {
			recipe := readmeRecipes(t)[name]
			// A boot the home takes before it serves.
			boot := `import time; time.sleep(0.3); ` + c.boot
			if name == "activated-demo" {
				boot = c.boot + `, "--boot-delay", "300ms"`
			}
			if !strings.Contains(recipe, c.boot) {
				t.Fatalf("recipe %s has no %q", name, c.boot)
			}
			recipe += "wake:\n  probe:\n    attempt_timeout: 1m\n"
			gw, base := recipeServe(t, recipe, c.boot, boot)
			code, body := recipeGet(t, base+c.path)
			if code != http.StatusOK || !strings.Contains(body, c.want) {
				t.Fatalf("first request: %d %q\n%s", code, body, gw.Output())
			}
			// The wake's line is logged once its callers have their
			// answer, so it may come just after the response.
			testbin.Eventually(t, "the wake's log line", func() bool { return strings.Contains(gw.Output(), "outcome=ready") })
			if !strings.Contains(gw.Output(), "probe_attempts=1 ") {
				t.Fatalf("the wake's probe did not pass at its first attempt:\n%s", gw.Output())
			}
		})
	}
}
