package gateway_test

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
)

// The real-app tests (TestRealApp*) run software nobody on this project
// wrote behind a sleeping exec home and drive it cold in headless
// Chromium through the gateway, under host routing (*.localhost needs no
// DNS). Select them alone with `go test -run TestRealApp ./gateway`.
// scripts/test.sh installs what they need: the Debian packages with
// apt-get and the npm packages, pinned, into a cache folder outside the
// checkout ($WAKEGATE_TEST_NPM, default /var/cache/wakegate-test/npm),
// reused by later runs. Each test skips without its tool unless CI=true.

// realNPMDefault is where scripts/test.sh installs the npm packages when
// WAKEGATE_TEST_NPM is unset.
const realNPMDefault = "/var/cache/wakegate-test/npm"

// realNeed skips the test (fails it under CI=true) with why.
func realNeed(t *testing.T, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (scripts/test.sh installs it)", why)
	}
	t.Skip(why)
}

// realNodeModule returns the folder of the npm package pkg in the test
// cache and the node binary, skipping the test without them.
func realNodeModule(t *testing.T, pkg string) (dir, node string) {
	t.Helper()
	node = "/usr/bin/node"
	if _, err := os.Stat(node); err != nil {
		realNeed(t, "node is not installed")
	}
	root := cmp.Or(os.Getenv("WAKEGATE_TEST_NPM"), realNPMDefault)
	dir = filepath.Join(root, "node_modules", pkg)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		realNeed(t, "the npm package %s is not installed in %s", pkg, root)
	}
	return dir, node
}

// realGateway starts a gateway with an admin listener from extra (homes,
// apps and settings; each home names its own command) and returns it with
// the port its proxy listens on. users is exec.users.mode: "off" runs the
// homes as the gateway's user, for a project folder the test owns.
func realGateway(t *testing.T, users, extra string) (*admGateway, string) {
	t.Helper()
	exec := fmt.Sprintf("[\"/bin/false\"]\n  users: {mode: %q}", users)
	a := admServe(t, e2eStartWithCommand(t, exec, admConfig(extra, "")))
	_, port, err := net.SplitHostPort(a.addr)
	if err != nil {
		t.Fatal(err)
	}
	return a, port
}

// realRepoLimits is the limits section of the config.yaml the gateway
// embeds (the repository's), so that the real apps meet the limits a new
// user gets.
func realRepoLimits(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for line := range strings.Lines(string(b)) {
		switch {
		case strings.HasPrefix(line, "limits:"):
			in = true
		case in && line != "\n" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#"):
			in = false
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatal("config.yaml has no limits section")
	}
	return strings.Join(out, "")
}

// realBrowser starts headless Chromium for the test; when the test fails
// it keeps a screenshot of the page as an artifact.
func realBrowser(t *testing.T, shot string) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(admChromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// A page left is ended, its sockets closed, not kept frozen.
		chromedp.Flag("disable-features", "BackForwardCache"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	// Against a hang only: an app's whole test, on a loaded machine.
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if t.Failed() {
			realScreenshot(t, ctx, shot)
		}
	})
	return ctx
}

// realTab opens a tab of ctx's browser and returns its context and the
// function that closes it, as a user closes a tab.
func realTab(t *testing.T, ctx context.Context) (context.Context, context.CancelFunc) {
	t.Helper()
	if err := chromedp.Do(ctx); err != nil { // the browser runs before a second tab opens
		t.Fatalf("chromium: %v", err)
	}
	tab, closeTab := chromedp.NewContext(ctx)
	t.Cleanup(closeTab)
	return tab, closeTab
}

// realScreenshot keeps the page's screenshot in the test's artifact folder
// (go test -artifacts keeps it; WAKEGATE_ARTIFACTS overrides the folder).
func realScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	dir := os.Getenv("WAKEGATE_ARTIFACTS")
	if dir == "" {
		dir = t.ArtifactDir()
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err == nil && os.WriteFile(path, shot, 0o644) == nil {
		t.Logf("screenshot: %s", path)
	}
}

// realPoll waits up to limit for a JavaScript expression to be true. It
// evaluates from here every 50ms rather than polling inside the page, so
// it survives the page navigating under it (the waiting page reloads
// itself into the app); an evaluation that fails meanwhile is tried again.
func realPoll(expr string, limit time.Duration) chromedp.Action[chromedp.Void] {
	eval := chromedp.Evaluate[bool]("!!(" + expr + ")")
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var last error
		held := false
		testbin.Poll(limit, 50*time.Millisecond, func() bool {
			ok, err := eval(ctx, tg)
			if err != nil {
				last = err
			}
			held = err == nil && ok
			return held || ctx.Err() != nil
		})
		if !held {
			return fmt.Errorf("%s not true after %v (last error: %v)", expr, limit, last)
		}
		return nil
	})
}

// realHomeStatus is the home's status from the admin API, and its
// sessions.
func realHomeStatus(t *testing.T, a *admGateway, id string) (string, int) {
	t.Helper()
	code, _, body := a.do(t, "GET", "/admin/homes/"+id, admToken, nil, nil)
	if code != 200 {
		t.Fatalf("GET /admin/homes/%s: %d %s", id, code, body)
	}
	h := admDecode[admHome](t, body)
	return h.Status, h.Sessions
}

// realTimed logs how long the test took, for the suite's budget.
func realTimed(t *testing.T) {
	// A browser loading thousands of modules from a home behind a race
	// build of the gateway, beside every other package's tests, measures
	// the machine's load: scripts/test.sh runs these tests in a step of
	// their own, without the detector.
	if raceOn {
		t.Skip("real apps run in their own step without -race: go test -run TestRealApp ./gateway")
	}
	start := time.Now()
	t.Cleanup(func() { t.Logf("%s took %v", t.Name(), time.Since(start).Round(time.Millisecond)) })
}
