package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// realViteModules is how many ES modules the generated Vite page loads.
const realViteModules = 2500

// realViteProject writes a Vite project of realViteModules modules, all
// imported by src/main.js, and src/hot.js, a module that accepts its own
// hot updates and writes its message into #hot.
func realViteProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	var main strings.Builder
	for i := range realViteModules {
		fmt.Fprintf(&main, "import v%d from './m/%d.js';\n", i, i)
	}
	main.WriteString("import './hot.js';\nlet n = 0;\n")
	for i := range realViteModules {
		fmt.Fprintf(&main, "n += v%d;\n", i)
	}
	main.WriteString("document.getElementById('status').textContent = 'loaded ' + n;\n")
	files := map[string]string{
		"index.html": `<!doctype html><html><head><meta charset="utf-8"><title>vite</title></head>` +
			`<body><div id="status">loading</div><div id="hot"></div><script type="module" src="/src/main.js"></script></body></html>`,
		"src/main.js": main.String(),
		"src/hot.js":  realViteHot("before"),
	}
	if err := os.MkdirAll(filepath.Join(src, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range realViteModules {
		files[fmt.Sprintf("src/m/%d.js", i)] = "export default 1;\n"
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// realViteHot is src/hot.js showing msg.
func realViteHot(msg string) string {
	return fmt.Sprintf("document.getElementById('hot').textContent = %q;\nif (import.meta.hot) import.meta.hot.accept();\n", msg)
}

// TestRealAppVite runs a Vite dev server (npm vite) with 2,500 modules in
// a sleeping home under host routing, with the default auto probe: Vite
// leaves a WebSocket upgrade without its vite-hmr subprotocol unanswered,
// so the probe must fall back to a GET rather than wait out the ready
// timeout. Chromium loads the page cold, reloads it five times with no
// request refused by the limits of the repository's config.yaml, and an
// edited module reaches the page by hot reload through the gateway's
// WebSocket, without a reload.
func TestRealAppVite(t *testing.T) {
	realTimed(t)
	viteDir, node := realNodeModule(t, "vite")
	project := realViteProject(t)
	a, port := realGateway(t, "off", fmt.Sprintf(`hosts:
  apps_domain: localhost
%s
homes:
  - id: vite
    command: [%q, %q, "--port", "{port}", "--host", "127.0.0.1", "--strictPort", "--clearScreen", "false"]
    working_dir: %q
apps:
  - slug: web
    home: vite
    health:
      start_period: 2m   # the first GET / compiles the page: slow on a busy machine
      timeout: 10s
`, realRepoLimits(t), node, filepath.Join(viteDir, "bin", "vite.js"), project))
	ctx := realBrowser(t, "vite.png")
	page := "http://web.localhost:" + port + "/"
	loaded := fmt.Sprintf(`(document.getElementById("status") || {}).textContent === "loaded %d"`, realViteModules)
	failed := `performance.getEntriesByType("resource").filter(e => e.responseStatus >= 400).length`

	start := time.Now()
	err := chromedp.Do(ctx, chromedp.Navigate(page), realPoll(loaded, 90*time.Second))
	if err != nil {
		t.Fatalf("cold load: %v\n%s", err, a.logs.String())
	}
	t.Logf("cold load: %v", time.Since(start).Round(time.Millisecond))
	for i := range 5 {
		start := time.Now()
		err := chromedp.Do(ctx, chromedp.Reload(), realPoll(loaded, 60*time.Second))
		var bad int
		if err == nil {
			bad, err = chromedp.Run(ctx, chromedp.Evaluate[int](failed))
		}
		if err != nil || bad != 0 {
			t.Fatalf("reload %d: %v; %d requests failed, %d limited", i+1, err, bad, len(a.logs.Lines("request limited")))
		}
		t.Logf("reload %d: %v", i+1, time.Since(start).Round(time.Millisecond))
	}
	if n := len(a.logs.Lines("request limited")); n > 0 {
		t.Errorf("%d requests were limited", n)
	}

	err = chromedp.Do(ctx,
		realPoll(`(document.getElementById("hot") || {}).textContent === "before"`, 10*time.Second),
		chromedp.Evaluate[chromedp.Void](`window.realMarker = true`))
	if err != nil {
		t.Fatalf("before the edit: %v", err)
	}
	if err := os.WriteFile(filepath.Join(project, "src", "hot.js"), []byte(realViteHot("after")), 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = chromedp.Do(ctx, realPoll(`(document.getElementById("hot") || {}).textContent === "after"`, 20*time.Second))
	if err != nil {
		t.Fatalf("hot update: %v", err)
	}
	t.Logf("hot update: %v", time.Since(start).Round(time.Millisecond))
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.realMarker === true`))
	if err != nil || !kept {
		t.Errorf("the page was reloaded rather than updated in place (%v)", err)
	}

	wakes := a.logs.Lines("wake")
	t.Logf("wake: %q", wakes)
	if len(wakes) == 0 || !strings.Contains(wakes[0], "ws upgrade unanswered") || !strings.Contains(wakes[0], "kind: http") {
		t.Errorf("the wake's log line does not say the upgrade went unanswered and how to skip it: %q", wakes)
	}
}
