package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

// recipeFiles are the pages that hold recipes, and the recipes each must
// hold: the README's four for the common apps, and docs/recipes.md's.
var recipeFiles = map[string][]string{
	"../README.md":       {"browser", "home", "websocket", "container"},
	"../docs/recipes.md": {"app", "socket", "activated", "activated-demo"},
}

// readmeRecipes returns the YAML blocks of README.md and docs/recipes.md
// that follow a `<!-- recipe: NAME -->` line, by name.
func readmeRecipes(t *testing.T) map[string]string {
	t.Helper()
	re := regexp.MustCompile("(?s)<!-- recipe: ([a-z-]+) -->\n```yaml\n(.*?)```")
	out := map[string]string{}
	for file, names := range recipeFiles {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if _, dup := out[m[1]]; dup {
				t.Fatalf("recipe %q is written twice", m[1])
			}
			out[m[1]] = m[2]
		}
		for _, name := range names {
			if out[name] == "" {
				t.Fatalf("%s has no recipe %q", file, name)
			}
		}
	}
	return out
}

// recipeUser is who runs a recipe's gateway: root, whose homes each get a
// user of their own (exec.users auto), or an ordinary user, whose homes
// run as itself.
type recipeUser string

const (
	asRoot recipeUser = "root"
	asUser recipeUser = "user"
)

// recipeUsers are the users a recipe is run as on this machine: both when
// the tests run as root (the gateway becomes uid 65534 through
// WAKEGATE_USER for the ordinary one), else the ordinary one alone.
func recipeUsers() []recipeUser {
	if os.Geteuid() == 0 {
		return []recipeUser{asRoot, asUser}
	}
	return []recipeUser{asUser}
}

// recipeServe runs `wakegate serve` on a recipe as README.md writes it,
// with only its listen address (127.0.0.1:8080) moved to a free port and
// the replacements in repl applied, and returns the gateway's base URL.
// Run as root, the gateway gives each home a user of its own: the test's
// folders and the wakegate binary are opened to other users (chmod o+x),
// as a machine's are, so that nothing makes it fall back to running homes
// as root.
func recipeServe(t *testing.T, recipe string, repl ...string) (*testbin.Proc, string) {
	t.Helper()
	return recipeServeAs(t, asRoot, recipe, repl...)
}

// recipeServeAs is recipeServe with the gateway run as who; asRoot on a
// machine where the tests do not run as root runs it as the tests' user.
func recipeServeAs(t *testing.T, who recipeUser, recipe string, repl ...string) (*testbin.Proc, string) {
	t.Helper()
	if !strings.Contains(recipe, "listen: 127.0.0.1:8080\n") {
		t.Fatalf("recipe does not listen on 127.0.0.1:8080:\n%s", recipe)
	}
	cfg := strings.Replace(recipe, "listen: 127.0.0.1:8080\n", "listen: \"%ADDR%\"\n", 1)
	cfg = strings.NewReplacer(repl...).Replace(cfg)
	dir := t.TempDir()
	env := []string{"WAKEGATE_TOKEN="}
	if os.Geteuid() == 0 {
		for _, d := range []string{filepath.Dir(dir), dir, filepath.Dir(testbin.Build(t))} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if who == asUser {
			env = append(env, "WAKEGATE_USER=65534:65534")
		}
	}
	gw := testbin.ServeEnv(t, dir, env, cfg)
	return gw, "http://" + gw.Addr
}

// recipeHomeUID returns the uid the home process the gateway last
// started runs as (its "exec: started home" line names its pid).
func recipeHomeUID(t *testing.T, gw *testbin.Proc) int {
	t.Helper()
	ms := regexp.MustCompile(`msg="exec: started home" .*? pid=(\d+) `).FindAllStringSubmatch(gw.Output(), -1)
	if len(ms) == 0 {
		t.Fatalf("no home was started:\n%s", gw.Output())
	}
	b, err := os.ReadFile("/proc/" + ms[len(ms)-1][1] + "/status")
	if err != nil {
		t.Fatalf("the home's process: %v", err)
	}
	m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Uid in the home's status:\n%s", b)
	}
	uid, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatalf("the home's Uid %q: %v", m[1], err)
	}
	return uid
}

// checkRecipeUser fails t when a home of gw runs as root, or the gateway
// said that homes share its user or cannot run their program.
func checkRecipeUser(t *testing.T, gw *testbin.Proc, who recipeUser) {
	t.Helper()
	uid := recipeHomeUID(t, gw)
	switch {
	case os.Geteuid() != 0:
	case who == asRoot && (uid == 0 || uid == 65534):
		t.Errorf("the home runs as uid %d; a root gateway gives it a user of its own", uid)
	case who == asUser && uid != 65534:
		t.Errorf("the home runs as uid %d; want the gateway's user, 65534", uid)
	}
	for _, bad := range []string{"exec homes run as the gateway's own user", "closed to the home's user"} {
		if who == asRoot && strings.Contains(gw.Output(), bad) {
			t.Errorf("the gateway says %q:\n%s", bad, gw.Output())
		}
	}
}

// recipeGet GETs url and returns the status and body.
func recipeGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return recipeGetHost(t, url, "")
}

// recipeGetHost GETs url with the Host header host ("" for the URL's).
func recipeGetHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// recipePython is a folder with one file for http.server to list. The
// recipes name /usr/bin/python3, which every user may run.
func recipePython(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is not installed")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte("the report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRecipesRunForEveryUser: every exec home of a recipe names its
// program by an absolute path outside /root, or the wakegate binary
// ({self}): a program found on root's PATH may be a version manager's
// shim in root's home folder, which the user a root gateway gives a home
// cannot run.
func TestRecipesRunForEveryUser(t *testing.T) {
	re := regexp.MustCompile(`(?m)^    command:(?: \["([^"]+)"|\n      - (\S+))`)
	for name, recipe := range readmeRecipes(t) {
		for _, m := range re.FindAllStringSubmatch(recipe, -1) {
			prog := m[1] + m[2]
			if prog != "{self}" && (!filepath.IsAbs(prog) || strings.HasPrefix(prog, "/root/")) {
				t.Errorf("recipe %s runs %q: name a program every user may run (an absolute path such as /usr/bin/python3)", name, prog)
			}
		}
	}
}

// TestRecipeApp runs docs/recipes.md's first recipe: a Python HTTP
// server that is already running, as an app.
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
// sleeps, an API reached through its app with the default auto probe, in
// its home folder (the command's working directory); as root, whose home
// gets a user of its own, and as an ordinary user.
func TestRecipeHome(t *testing.T) {
	recipePython(t)
	for _, who := range recipeUsers() {
		t.Run(string(who), func(t *testing.T) {
			gw, base := recipeServeAs(t, who, readmeRecipes(t)["home"])
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
			checkRecipeUser(t, gw, who)
		})
	}
}

// TestRecipeBrowser runs recipe 1: the same home as a browser app under
// host routing, at files.localhost (a name every browser sends to
// loopback; the test sends its Host to 127.0.0.1), at the root of its
// host; a navigation gets the waiting page or the app, and then the app.
// Run as root and as an ordinary user.
func TestRecipeBrowser(t *testing.T) {
	recipePython(t)
	for _, who := range recipeUsers() {
		t.Run(string(who), func(t *testing.T) {
			gw, base := recipeServeAs(t, who, readmeRecipes(t)["browser"])
			port := strings.TrimPrefix(base, "http://127.0.0.1")
			host := "files.localhost" + port
			testbin.Eventually(t, "the app at the root of its host", func() bool {
				code, body := recipeGetHost(t, base+"/", host)
				return code == http.StatusOK && strings.Contains(body, "Directory listing for /")
			})
			if code, body := recipeGetHost(t, base+"/.tmp/", host); os.Geteuid() == 0 && who == asRoot &&
				(code != http.StatusOK || !strings.Contains(body, "Directory listing for /.tmp/")) {
				t.Errorf("the home's own TMPDIR, .tmp in its folder: %d %q", code, body)
			}
			if code, _ := recipeGetHost(t, base+"/", "other.localhost"+port); code != http.StatusNotFound {
				t.Errorf("an unknown name under the apps domain: %d, want 404", code)
			}
			checkRecipeUser(t, gw, who)
		})
	}
}

// TestRecipeContainer checks recipe 4, a home in a container: the config
// is valid as written (running it needs an engine and the image).
func TestRecipeContainer(t *testing.T) {
	recipe := readmeRecipes(t)["container"]
	dir := t.TempDir()
	path := filepath.Join(dir, "wakegate.yaml")
	if err := os.WriteFile(path, []byte(recipe), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testbin.Start(t, dir, nil, "check-config", "--config", path)
	if err, _ := p.Wait(60 * time.Second); err != nil {
		t.Fatalf("check-config: %v\n%s", err, p.Output())
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

// TestRecipeSocket runs docs/recipes.md's socket recipe: the demo home on
// a Unix socket in its folder, reached through the gateway over HTTP and
// WebSocket; forwarded requests carry the client's Host (docs/headers.md).
func TestRecipeSocket(t *testing.T) {
	recipe := readmeRecipes(t)["socket"]
	_, base := recipeServe(t, recipe)
	status, body := recipeGet(t, base+"/node/chat/whoami")
	if status != http.StatusOK || !strings.Contains(body, `"host":"`+strings.TrimPrefix(base, "http://")+`"`) {
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

// TestRecipeActivated runs docs/recipes.md's socket activation: a Python home that serves the socket
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
			checkRecipeUser(t, gw, asRoot)
		})
	}
}
