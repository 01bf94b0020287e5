package web

import (
	"strings"
	"testing"
)

// TestThemes renders every built-in theme: each is the same page (the
// phase text, the status URL, the script and style under the answer's
// nonce) carrying its own name and style sheet, and only the minimal
// theme may be framed, by the gateway's own origin alone.
func TestThemes(t *testing.T) {
	d := Waiting{Name: "Alice's <notebook>", Phase: "probing", PhaseText: "Checking that it answers…",
		StatusURL: "/_wakegate/wake/node/alice", RefreshURL: "/_wakegate/wake/node/alice?to=%2F", RefreshSeconds: 2,
		RetryURL: "/node/alice/", RequestID: "req-1", Nonce: "bm9uY2Utbm9uY2U"}
	sheets := map[string]bool{}
	for _, name := range ThemeNames() {
		wt, ok := Theme(name)
		if !ok || wt.Theme() != name {
			t.Fatalf("theme %q: %v", name, ok)
		}
		var b strings.Builder
		if err := wt.Render(&b, d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		page := b.String()
		for _, want := range []string{`data-theme="` + name + `"`, `data-phase="probing"`, "Checking that it answers…",
			"Starting Alice&#39;s &lt;notebook&gt;", `<script nonce="bm9uY2Utbm9uY2U">`, `<style nonce="bm9uY2Utbm9uY2U">`,
			`"/_wakegate/wake/node/alice"`, `role="progressbar"`, "prefers-reduced-motion"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the page lacks %s", name, want)
			}
		}
		if strings.Count(page, "<script") != 1 || strings.Count(page, "<style") != 1 {
			t.Errorf("%s: want one script and one style element", name)
		}
		if strings.Contains(page, "ZgotmplZ") {
			t.Errorf("%s: the template refused a value", name)
		}
		css := string(wt.css)
		if css == "" || sheets[css] || !strings.Contains(page, css) {
			t.Errorf("%s: its style sheet is missing, empty or another theme's", name)
		}
		sheets[css] = true
		csp, frame := wt.CSP("N"), wt.FrameOptions()
		if name == ThemeMinimal {
			if !strings.HasSuffix(csp, "frame-ancestors 'self'") || frame != "SAMEORIGIN" {
				t.Errorf("%s: %q, X-Frame-Options %s; want framing by its own origin only", name, csp, frame)
			}
		} else if csp != WaitingCSP("N") || frame != "DENY" {
			t.Errorf("%s: %q, X-Frame-Options %s; want the waiting page's CSP and DENY", name, csp, frame)
		}
	}
	if DefaultWaiting().Theme() != ThemeDefault {
		t.Errorf("the default page is theme %q", DefaultWaiting().Theme())
	}
	if _, ok := Theme("neon"); ok {
		t.Error("an unknown theme was found")
	}
	own, err := ParseWaiting("own.html", "<p>{{.Name}}</p>")
	if err != nil || own.Theme() != "" || own.CSP("N") != WaitingCSP("N") || own.FrameOptions() != "DENY" {
		t.Errorf("an operator's page: %v, theme %q", err, own.Theme())
	}
}
