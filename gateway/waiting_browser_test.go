package gateway_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/wakerecord"
)

// wtRecorder runs in every document the browser loads: it records in
// sessionStorage (which outlives the page's reload into the app) the
// phase each waiting page starts in and every phase it moves to, the
// page's accessibility marks and every Content-Security-Policy violation.
const wtRecorder = `document.addEventListener("securitypolicyviolation", function (e) {
  var v = JSON.parse(sessionStorage.getItem("csp") || "[]");
  v.push(e.violatedDirective + " " + e.blockedURI);
  sessionStorage.setItem("csp", JSON.stringify(v));
});
document.addEventListener("DOMContentLoaded", function () {
  var b = document.body;
  if (!b || !b.dataset.phase) return;
  function rec(p) {
    var a = JSON.parse(sessionStorage.getItem("seen") || "[]");
    if (a[a.length - 1] !== p) { a.push(p); sessionStorage.setItem("seen", JSON.stringify(a)); }
  }
  var bar = document.querySelector('[role="progressbar"]'), live = document.querySelector('[aria-live]');
  sessionStorage.setItem("marks", JSON.stringify({progressbar: !!bar, live: !!live,
    reducedMotion: Array.prototype.some.call(document.styleSheets, function (s) {
      return Array.prototype.some.call(s.cssRules, function (r) { return r.conditionText && r.conditionText.indexOf("prefers-reduced-motion") >= 0; }); })}));
  rec("page:" + b.dataset.phase);
  new MutationObserver(function () {
    rec(b.dataset.phase);
    if (b.dataset.phase !== "ready") return;
    // What the page shows the moment it knows the home is ready, before
    // its reload: the bar's painted share of its track, and the time.
    var fill = document.getElementById("fill"), track = document.getElementById("bar");
    sessionStorage.setItem("ready", JSON.stringify({
      bar: fill.getBoundingClientRect().width / track.getBoundingClientRect().width,
      timing: document.getElementById("timing").textContent}));
  }).observe(b, {attributes: true, attributeFilter: ["data-phase"]});
});`

// wtBrowser is admBrowser with wtRecorder installed in every document.
func wtBrowser(t *testing.T) context.Context {
	t.Helper()
	ctx := admBrowser(t)
	wtRecord(t, ctx)
	return ctx
}

// wtRecord installs wtRecorder in every document of ctx's tab.
func wtRecord(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: wtRecorder}); err != nil {
		t.Fatalf("install the recorder: %v", err)
	}
}

// wtSeen returns the phases the recorder saw and the page's marks.
func wtSeen(ctx context.Context) (seen []string, marks map[string]bool, err error) {
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("seen") + "\n" + sessionStorage.getItem("marks")`))
	if err != nil {
		return nil, nil, err
	}
	a, b, _ := strings.Cut(raw, "\n")
	_ = json.Unmarshal([]byte(a), &seen)
	_ = json.Unmarshal([]byte(b), &marks)
	return seen, marks, nil
}

// TestWaitingPageBrowserBoot opens a home with a 2 s boot in headless
// Chromium: the navigation gets the waiting page after the hold, the page
// moves through the wake's phases from the status stream, and turns into
// the home's own page by itself, at the same URL.
func TestWaitingPageBrowserBoot(t *testing.T) {
	t.Parallel()
	gw := wtStart(t, "")
	ctx := wtBrowser(t)
	url := "http://" + gw.addr + "/node/slow/"
	err := chromedp.Do(ctx, chromedp.Navigate(url))
	if err == nil {
		// Polled from here: the page reloads itself under the poll, which
		// a poll inside the page does not survive.
		testbin.Eventually(t, "the home's own page", func() bool {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.body !== null && document.body.textContent.indexOf("wakegate demo home") >= 0`))
			return err == nil && ok
		})
	}
	var loc string
	if err == nil {
		loc, err = chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	}
	var seen []string
	var marks map[string]bool
	if err == nil {
		seen, marks, err = wtSeen(ctx)
	}
	admScreenshot(t, ctx, "waiting-boot.png")
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if loc != url {
		t.Errorf("landed on %s; want %s", loc, url)
	}
	if len(seen) < 2 || !strings.HasPrefix(seen[0], "page:") || seen[len(seen)-1] != wakerecord.Ready ||
		!slices.Contains(seen, wakerecord.Probing) && seen[0] != "page:"+wakerecord.Probing {
		t.Errorf("phases seen %v; want the waiting page, probing, then ready", seen)
	}
	if !marks["progressbar"] || !marks["live"] || !marks["reducedMotion"] {
		t.Errorf("page marks %v; want a progressbar, a live region and a reduced-motion rule", marks)
	}
	// The page ran under its Content-Security-Policy without a violation
	// (a blocked script or style would also have stopped it above).
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("csp") || "[]"`)); err != nil || v != "[]" {
		t.Errorf("Content-Security-Policy violations on the waiting page: %s (%v)", v, err)
	}
	if n := routesWakeStarts(gw, "slow"); n != 1 {
		t.Errorf("%d wakes; want 1", n)
	}
	// At ready the bar reads complete at once, and the time shown is the
	// wait's own: at least the home's 2 s boot.
	var ready struct {
		Bar    float64
		Timing string
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("ready") || "{}"`))
	if err != nil || json.Unmarshal([]byte(raw), &ready) != nil {
		t.Fatalf("the page's state at ready: %q (%v)", raw, err)
	}
	if ready.Bar < 0.99 {
		t.Errorf("at ready the bar shows %.0f%%; want it complete", ready.Bar*100)
	}
	var secs float64
	if m := regexp.MustCompile(`([0-9.]+) s`).FindStringSubmatch(ready.Timing); m != nil {
		secs, _ = strconv.ParseFloat(m[1], 64)
	}
	if secs < 2 {
		t.Errorf("at ready the page says %q; the wait took the home's 2 s boot at least", ready.Timing)
	}
	t.Logf("phases seen: %v; at ready: %+v", seen, ready)
}

// TestWaitingPageBrowserCrash opens a home that crashes in headless
// Chromium: the page shows the failure, with the request id under which
// the gateway logged the cause and a retry button, once the provider gave
// up on the home; its status stream has ended and the failed home was not
// woken again.
func TestWaitingPageBrowserCrash(t *testing.T) {
	t.Parallel()
	gw := wtStart(t, "")
	ctx := wtBrowser(t)
	url := "http://" + gw.addr + "/node/crash/"
	err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		admPoll(`document.body.dataset.phase === "failed" && !document.getElementById("failure").hidden`),
	)
	var id, message, retry string
	var retryVisible bool
	if err == nil {
		id, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#request-id`)))
	}
	if err == nil {
		message, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#message`)))
	}
	if err == nil {
		retry, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("retry").href`))
	}
	if err == nil {
		retryVisible, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("retry").offsetParent !== null`))
	}
	var seen []string
	if err == nil {
		seen, _, err = wtSeen(ctx)
	}
	admScreenshot(t, ctx, "waiting-crash.png")
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if retry != url || !retryVisible {
		t.Errorf("retry button to %q (visible %v); want %s", retry, retryVisible, url)
	}
	if message == "" || len(wtLeaks(t, gw, message)) > 0 {
		t.Errorf("failure message %q", message)
	}
	if id == "" || !strings.Contains(gw.logs.String(), "request_id="+id+" cause=") {
		t.Errorf("request id %q is not the one under which the log has the cause", id)
	}
	if len(seen) == 0 || seen[len(seen)-1] != wakerecord.Failed {
		t.Errorf("phases seen %v; want failed last", seen)
	}
	// The stream ended with the failure: its access line is written when
	// its handler returns.
	testbin.Eventually(t, "the page's status stream to end", func() bool {
		for _, line := range gw.logs.Lines("access") {
			if strings.Contains(line, "path=/_wakegate/wake/node/crash status=200") {
				return true
			}
		}
		return false
	})
	if n := routesWakeStarts(gw, "crash"); n != 1 {
		t.Errorf("%d wakes of the failed home; want 1", n)
	}
	t.Logf("phases seen: %v", seen)
}
