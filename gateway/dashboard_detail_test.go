package gateway_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardHomeDetail drives the home detail in headless Chromium:
// open the demo home's details, press wake, and watch the wake's phase
// timings appear in its wakes table, then a line the home writes arrive
// in the live log tail, without a reload.
func TestDashboardHomeDetail(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	ctx := admBrowser(t)
	err := admLogin(ctx, a, `button[data-detail="demo"]`)
	if err == nil {
		err = chromedp.Do(ctx,
			admClick(`button[data-detail="demo"]`),
			chromedp.WaitVisible(chromedp.CSS(`#detail`)),
			admPoll(`document.getElementById("detail-log-state").textContent === "live"`),
			admPoll(`document.getElementById("detail-wakes").textContent.indexOf("No wake finished") >= 0`),
			admClick(`button[aria-label="Wake home demo"]`),
			admPoll(`(function(){var r=document.querySelector('#detail-wakes tr.wake.ready');
				return !!r && r.children[1].textContent === "admin" && / ms| s/.test(r.children[5].textContent)})()`),
			admPoll(`document.getElementById("detail-log").textContent.indexOf("listening addr=") >= 0`),
		)
	}
	if err == nil {
		appendLog(t, homeFile(a.data, "demo", "home.log"),
			"127.0.0.1 - - [01/Dec/2026 18:00:00] \"GET /healthz HTTP/1.1\" 200 -\na line written while the detail is open\n")
		err = chromedp.Do(ctx, admPoll(`document.getElementById("detail-log").textContent.indexOf("a line written while the detail is open") >= 0`))
	}
	// The request line (a health check's, as a home's access log writes
	// it) is told apart from the home's own line and hidden until asked
	// for; the home's own line shows.
	const shown = `(function(){var out={};document.querySelectorAll("#detail-log span").forEach(function(s){
		if (s.textContent.indexOf("GET /healthz") >= 0) out.request = s.offsetParent !== null && s.classList.contains("request");
		if (s.textContent.indexOf("while the detail is open") >= 0) out.own = s.offsetParent !== null;});
		return JSON.stringify(out)})()`
	var before, after string
	if err == nil {
		before, err = chromedp.Run(ctx, chromedp.Evaluate[string](shown))
	}
	if err == nil {
		err = chromedp.Do(ctx, admClick(`#detail-log-requests`))
	}
	if err == nil {
		after, err = chromedp.Run(ctx, chromedp.Evaluate[string](shown))
	}
	if err == nil && (before != `{"request":false,"own":true}` || after != `{"request":true,"own":true}`) {
		t.Errorf("request line and own line shown %s, then %s after asking for request lines", before, after)
	}
	var facts, labels string
	if err == nil {
		facts, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#detail-facts`)))
	}
	if err == nil {
		labels, err = chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('tr[data-home="demo"] button')).map(function(b){return b.getAttribute("aria-label")}).join("|")`))
	}
	admScreenshot(t, ctx, "dashboard-detail.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, want := range []string{"running", "healthy", "0 requests", "never"} {
		if !strings.Contains(facts, want) {
			t.Errorf("detail facts %q lack %q", facts, want)
		}
	}
	if labels != "Open details of home demo|Wake home demo|Suspend home demo|Roll home demo|Refresh home demo" {
		t.Errorf("row buttons' accessible names: %q", labels)
	}
}
