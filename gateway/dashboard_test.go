package gateway_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// admChromium returns the system Chromium, skipping the test when it is
// absent outside CI (under CI=true its absence fails the test).
func admChromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/test.sh installs it)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// TestDashboardWakeLive drives the dashboard in headless Chromium: load it,
// enter the token, press wake on the sleeping demo home and watch its
// status turn to running and its last wake time appear, without a reload,
// from the event stream. A screenshot is kept as an artifact.
func TestDashboardWakeLive(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	ctx := admBrowser(t)
	var err error

	row := `tr[data-home="demo"]`
	text := func(sel string) string {
		if err != nil {
			return ""
		}
		var v string
		v, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		return v
	}
	var before, status, lastWake, events, conn string
	var marker bool
	err = admLogin(ctx, a, row+` .status .pill`)
	before = text(row + ` .status`)
	if err == nil {
		err = chromedp.Do(ctx,
			// Survives only if the page is not reloaded.
			chromedp.Evaluate[chromedp.Void](`window.admMarker = true`),
			admClick(`button[data-action="wake"][data-home="demo"]`),
			admPoll(`(function(){var r=document.querySelector('tr[data-home="demo"]');
				return r && r.querySelector('.status').textContent === "running" && r.querySelector('.last-wake').textContent !== "never"})()`),
			admPoll(`document.getElementById("events").textContent.indexOf("Home demo woke up in") >= 0`),
			admPoll(`document.getElementById("n-running").textContent === "1"`),
		)
	}
	status, lastWake, events, conn = text(row+` .status`), text(row+` .last-wake`), text(`#events`), text(`#conn`)
	if err == nil {
		marker, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`window.admMarker === true`))
	}
	admScreenshot(t, ctx, "dashboard-wake.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if before != "sleeping" {
		t.Errorf("status before the wake: %q, want sleeping", before)
	}
	if status != "running" || lastWake == "never" || !strings.Contains(lastWake, "(") {
		t.Errorf("after the wake: status %q, last wake %q", status, lastWake)
	}
	if !strings.Contains(events, "Home demo is waking") || !strings.Contains(events, "Home demo woke up in") {
		t.Errorf("recent events: %q", events)
	}
	if conn != "live" || !marker {
		t.Errorf("event stream %q, page kept (not reloaded): %v", conn, marker)
	}
}

// TestDashboardKeepsEventsOverOlderAnswers: a page of homes asked for
// while a home was waking, whose answer reaches the dashboard after the
// event that says the home is running, does not turn its row back. A
// wrapper around the page's fetch holds each answer that shows the home
// not running until the row shows running, then lets it through; answers
// that show it running wait until the row has been read.
func TestDashboardKeepsEventsOverOlderAnswers(t *testing.T) {
	t.Parallel()
	command := fmt.Sprintf(`[%q, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--boot-delay", "1500ms"]`, testbin.Build(t))
	a := admServe(t, e2eStartWithCommand(t, command, admConfig(admDemo, "")))
	ctx := admBrowser(t)
	row := `tr[data-home="demo"]`
	err := admLogin(ctx, a, row+` .status .pill`)
	var status, lastWake string
	var held int
	if err == nil {
		err = chromedp.Do(ctx,
			chromedp.Evaluate[chromedp.Void](`(function(){
				var orig = window.fetch;
				window.staleHeld = 0; window.staleApplied = false; window.rowRead = false;
				function running() { var r = document.querySelector('tr[data-home="demo"] .status'); return !!r && r.textContent === "running"; }
				function until(cond) { return new Promise(function (res) { (function loop() { if (cond()) { res(); } else { setTimeout(loop, 10); } })(); }); }
				window.fetch = function (u, o) {
					var p = orig(u, o);
					if (typeof u !== "string" || u.indexOf("/admin/homes?") !== 0) { return p; }
					return p.then(function (r) {
						return r.clone().json().then(function (body) {
							var d = (body.homes || []).filter(function (h) { return h.id === "demo"; })[0];
							if (d && d.status !== "running") {
								window.staleHeld++;
								return until(running).then(function () { setTimeout(function () { window.staleApplied = true; }, 200); return r; });
							}
							return until(function () { return window.rowRead; }).then(function () {
								setTimeout(function () { window.freshApplied = true; }, 200);
								return r;
							});
						});
					});
				};
			})()`),
			admClick(`button[data-action="wake"][data-home="demo"]`),
			admPoll(`window.staleApplied === true`),
		)
	}
	if err == nil {
		status, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` .status`)))
	}
	if err == nil {
		lastWake, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` .last-wake`)))
	}
	if err == nil {
		held, err = chromedp.Run(ctx, chromedp.Evaluate[int](`window.rowRead = true, window.staleHeld`))
	}
	// Then a page asked for after the event: the wake's time the API
	// gives (when it began) is the one the event showed.
	var apiWake string
	if err == nil {
		err = chromedp.Do(ctx, admPoll(`window.freshApplied === true`))
	}
	if err == nil {
		apiWake, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+` .last-wake`)))
	}
	admScreenshot(t, ctx, "dashboard-stale-answer.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if held == 0 {
		t.Fatal("no page of homes was asked for while the home woke: nothing was tested")
	}
	if status != "running" || lastWake == "never" {
		t.Errorf("after %d older pages of homes arrived: status %q, last wake %q; want running and a time", held, status, lastWake)
	}
	if !sameClock(lastWake, apiWake) {
		t.Errorf("last wake from the event %q, from the API %q: want the same time", lastWake, apiWake)
	}
}

// sameClock reports whether the dashboard's wake cells a and b ("02:00:28
// PM (1.6 s)") name the same time, give or take the second the event's
// own time may round across.
func sameClock(a, b string) bool {
	if a == b {
		return true
	}
	ta, ea := time.Parse("03:04:05 PM", strings.SplitN(a, " (", 2)[0])
	tb, eb := time.Parse("03:04:05 PM", strings.SplitN(b, " (", 2)[0])
	if ea != nil || eb != nil {
		return false
	}
	d := ta.Sub(tb)
	return d >= -time.Second && d <= time.Second
}

// TestDashboardAppOperations drives the dashboard's app buttons in
// headless Chromium: Stop turns the demo app stopped and Start makes it
// ready again, each through the admin API's app operations, with no
// error shown.
func TestDashboardAppOperations(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	ctx := admBrowser(t)
	phase := func(p string) chromedp.Action[chromedp.Void] {
		return admPoll(`(function(){var r=document.querySelector('tr[data-app="demo"] .phase .pill');
			return r && r.textContent === "` + p + `"})()`)
	}
	err := admLogin(ctx, a, `button[data-app-action="stop"][data-app="demo"]`)
	if err == nil {
		err = chromedp.Do(ctx,
			admClick(`button[data-app-action="stop"][data-app="demo"]`),
			phase("stopped"),
			admPoll(`!document.querySelector('button[data-app="demo"]').disabled`),
			admClick(`button[data-app-action="start"][data-app="demo"]`),
			phase("ready"),
			admPoll(`!document.querySelector('button[data-app="demo"]').disabled`),
		)
	}
	var shown string
	if err == nil {
		shown, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#action-error`)))
	}
	admScreenshot(t, ctx, "dashboard-app.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if shown != "" {
		t.Errorf("error shown: %q", shown)
	}
}

// admPoll waits for a JavaScript expression to be true.
func admPoll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(testbin.WaitLimit))
}

// admClick clicks the element sel names as soon as it exists. The query
// and the click run in one evaluation, so a row the dashboard re-renders
// from its event stream between them cannot leave a stale node to click.
func admClick(sel string) chromedp.Action[chromedp.Void] {
	return admPoll(`(function(){var b=document.querySelector(` + strconv.Quote(sel) + `);if(!b)return false;b.click();return true})()`)
}

// admLogin opens a's dashboard, enters the token and waits until the
// event stream is live and sel is visible.
func admLogin(ctx context.Context, a *admGateway, sel string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(a.admin+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), admToken),
		chromedp.Click(chromedp.CSS(`#connect`)),
		chromedp.WaitVisible(chromedp.CSS(sel)),
		admPoll(`document.getElementById("conn").textContent === "live"`),
	)
}

// admScreenshot keeps a screenshot of the page as an artifact (under
// WAKEGATE_ARTIFACTS when set).
func admScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return
	}
	dir := os.Getenv("WAKEGATE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if os.MkdirAll(dir, 0o755) == nil {
		path := filepath.Join(dir, name)
		if os.WriteFile(path, shot, 0o644) == nil {
			t.Logf("screenshot: %s", path)
		}
	}
}

// admBrowser starts headless Chromium for the test and returns its
// context, bounded against a hang and ended with the test; extra adds
// Chromium flags.
func admBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chromium := admChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	ctx, cancel := context.WithTimeout(ctx, 2*testbin.WaitLimit) // guards against a hang only
	t.Cleanup(cancel)
	return ctx
}

// TestDashboardFleetCardNamesEachRun: on a gateway of a fleet the
// dashboard's fleet card lists the live gateways, each with the process
// that runs it (pid and host, from its claim on its instance name).
func TestDashboardFleetCardNamesEachRun(t *testing.T) {
	t.Parallel()
	srv := registrytest.StartRedis(t)
	a := admStart(t, fmt.Sprintf("instance: gw-dash\nredis:\n  url: %q\n  prefix: dash\n", srv.URL()), "")
	ctx := admBrowser(t)
	host, _ := os.Hostname()
	run := fmt.Sprintf("pid %d on %s", os.Getpid(), host)
	err := admLogin(ctx, a, `#fleet-card`)
	var card string
	if err == nil {
		err = chromedp.Do(ctx, admPoll(`(function(){var c=document.getElementById("fleet");
			return c && c.textContent.indexOf("gw-dash") >= 0 && c.textContent.indexOf(`+strconv.Quote(run)+`) >= 0})()`))
	}
	if err == nil {
		card, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#fleet`)))
	}
	admScreenshot(t, ctx, "dashboard-fleet.png")
	if err != nil {
		t.Fatalf("dashboard fleet card: %v (card %q)", err, card)
	}
	if !strings.Contains(card, "Run") {
		t.Errorf("the fleet card has no Run column: %q", card)
	}
}
