package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
)

// lbModules is how many ES modules the test page's main.js imports, each
// its own request, as a development server (Vite and the like) serves a
// large app on its first view.
const lbModules = 1000

// lbPage writes a page whose main.js imports lbModules small modules into
// a new folder and returns it.
func lbPage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	var main strings.Builder
	for i := range lbModules {
		fmt.Fprintf(&main, "import \"./m/%d.js\";\n", i)
		mod := fmt.Sprintf("globalThis.loaded = (globalThis.loaded || 0) + 1; export const v%d = %d;\n", i, i)
		if err := os.WriteFile(filepath.Join(dir, "m", fmt.Sprintf("%d.js", i)), []byte(mod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	main.WriteString("document.title = \"loaded \" + globalThis.loaded;\n")
	files := map[string]string{
		"main.js":    main.String(),
		"index.html": "<!doctype html><title>loading</title><script type=\"module\" src=\"main.js\"></script>\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// lbDefaultLimits is the limits section of the embedded config.yaml.
func lbDefaultLimits(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "limits:":
			in = true
		case in && !strings.HasPrefix(line, " ") && strings.TrimSpace(line) != "":
			in = false
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) < 2 {
		t.Fatal("config.yaml has no limits section")
	}
	return strings.Join(out, "\n") + "\n"
}

// TestDefaultLimitsServeAModulePage opens, in headless Chromium, a page
// whose main.js imports a thousand modules, served by a real Python HTTP
// server as an app behind a gateway with the embedded config's limits: a
// browser does not retry a script answered 429, so one limited request
// leaves the page broken. It must load whole, every module counted.
func TestDefaultLimitsServeAModulePage(t *testing.T) {
	realTimed(t) // a page of many modules in Chromium: the real apps' step, without -race
	admChromium(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	port := testbin.FreePort(t)
	srv := exec.Command(py, "-m", "http.server", "--bind", "127.0.0.1", "--directory", lbPage(t), fmt.Sprint(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	gw := e2eStartInProcess(t, lbDefaultLimits(t)+fmt.Sprintf(`
apps:
  - slug: mods
    upstream: http://127.0.0.1:%d
    strip_prefix: true
`, port))
	c := e2eClient(t)
	page := "http://" + gw.addr + "/apps/mods/index.html"
	testbin.Eventually(t, "the app to be served", func() bool {
		res, _ := e2eGet(t, c, page, nil)
		return res.StatusCode == 200
	})

	ctx := admBrowser(t)
	want := fmt.Sprintf("loaded %d", lbModules)
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	var title string
	defer func() {
		t.Logf("title %q after %s; %d requests limited", title, time.Since(start).Round(time.Millisecond),
			strings.Count(gw.logs.String(), "status=429"))
	}()
	testbin.Eventually(t, "the page to load every module", func() bool {
		var err error
		title, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
		return err == nil && title == want
	})
	if n := strings.Count(gw.logs.String(), "status=429"); n != 0 {
		t.Errorf("%d requests were limited", n)
	}

	// A flood of new connections from the same client still meets the
	// limit (limits.conn_rate): each request below opens its own.
	flood := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	limited := 0
	for i := 0; i < 6000 && limited == 0; i++ {
		res, err := flood.Get("http://" + gw.addr + "/no-such-route")
		if err != nil || res.StatusCode == http.StatusTooManyRequests {
			limited = i + 1
		}
		if err == nil {
			_ = res.Body.Close()
		}
	}
	if limited == 0 {
		t.Error("6,000 new connections in a row from one client were never limited")
	}
	t.Logf("the flood was limited at connection %d", limited)
}
