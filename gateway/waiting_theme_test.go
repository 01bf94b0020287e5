package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/route"
	"github.com/wakegate/wakegate/wakerecord"
)

// thStart serves a gateway whose waiting pages are themed at every level:
// wake.waiting_theme plain, a home of each theme (th-plain has none of its
// own), an app with a theme of its own in a dark home and an app without
// one in another. Each home listens after a 3 s boot.
func thStart(t *testing.T) *e2eGateway {
	t.Helper()
	return wtStartWith(t, "3s", `  waiting_theme: plain
homes:
  - id: th-default
    waiting_theme: default
  - id: th-plain
  - id: th-dark
    waiting_theme: dark
  - id: th-minimal
    waiting_theme: minimal
  - id: th-apps
    waiting_theme: dark
apps:
  - slug: th-own
    home: th-apps
    waiting_theme: minimal
  - slug: th-inherit
    home: th-dark
`)
}

var (
	thTheme = regexp.MustCompile(`<body data-theme="([a-z]*)" data-phase="([a-z]*)">`)
	thNonce = regexp.MustCompile(`<script nonce="([^"]+)">`)
)

// TestWaitingPageThemes: a browser's navigation to a sleeping home or app
// gets the waiting page in the theme its level picks (the app's own, else
// its home's, else wake.waiting_theme), with the phase it is in and its
// sentence, under the waiting page's Content-Security-Policy with this
// answer's nonce; only the minimal theme may be framed, by the gateway's
// own origin.
func TestWaitingPageThemes(t *testing.T) {
	t.Parallel()
	gw := thStart(t)
	c := e2eClient(t)
	for _, tc := range []struct{ path, theme string }{
		{"/node/th-default/", "default"},
		{"/node/th-plain/", "plain"},
		{"/node/th-dark/", "dark"},
		{"/apps/th-inherit/", "dark"},
		{"/node/th-minimal/", "minimal"},
		{"/node/th-apps/", "dark"},
		{"/apps/th-own/", "minimal"},
	} {
		res, body := e2eGet(t, c, "http://"+gw.addr+tc.path, wtNav)
		page := string(body)
		m, n := thTheme.FindStringSubmatch(page), thNonce.FindStringSubmatch(page)
		if res.StatusCode != http.StatusServiceUnavailable || m == nil || n == nil {
			t.Errorf("%s: %d, no themed waiting page:\n%s", tc.path, res.StatusCode, page)
			continue
		}
		if m[1] != tc.theme {
			t.Errorf("%s: theme %q; want %s", tc.path, m[1], tc.theme)
		}
		if want := `<p id="state" role="status" aria-live="polite">` + route.PhaseText(m[2]) + `</p>`; m[2] == "" || !strings.Contains(page, want) {
			t.Errorf("%s: phase %q without its sentence", tc.path, m[2])
		}
		csp, frame := res.Header.Get("Content-Security-Policy"), res.Header.Get("X-Frame-Options")
		ancestors, wantFrame := "frame-ancestors 'none'", "DENY"
		if tc.theme == "minimal" {
			ancestors, wantFrame = "frame-ancestors 'self'", "SAMEORIGIN"
		}
		if !strings.Contains(csp, "script-src 'nonce-"+n[1]+"'; style-src 'nonce-"+n[1]+"'") || !strings.HasPrefix(csp, "default-src 'none';") ||
			!strings.HasSuffix(csp, ancestors) || frame != wantFrame {
			t.Errorf("%s: CSP %q, X-Frame-Options %q; want the page's nonce, %s and %s", tc.path, csp, frame, ancestors, wantFrame)
		}
	}
}

// TestWaitingPageBrowserThemes opens a sleeping home of each built-in
// theme in headless Chromium: the page shows its theme and the phase's
// sentence, runs without a Content-Security-Policy violation, follows the
// wake's phases and turns into the home's own page by itself.
//
// With WAKEGATE_THEME_SHOTS set to a folder, it also writes a screenshot
// of each theme there, waiting-{theme}.png, taken while the home wakes;
// docs/waiting-page.md shows the ones in docs/img, made with
//
//	WAKEGATE_THEME_SHOTS=$PWD/docs/img go test ./gateway -run TestWaitingPageBrowserThemes
func TestWaitingPageBrowserThemes(t *testing.T) {
	t.Parallel()
	shots := os.Getenv("WAKEGATE_THEME_SHOTS")
	gw := thStart(t)
	browser := admBrowser(t)
	for _, theme := range []string{"default", "plain", "dark", "minimal"} {
		tab, cancel := chromedp.NewContext(browser)
		wtRecord(t, tab)
		url := "http://" + gw.addr + "/node/th-" + theme + "/"
		var state string
		err := chromedp.Do(tab, chromedp.EmulateViewport(thViewport(theme)), chromedp.Navigate(url),
			admPoll(`document.body !== null && document.body.dataset.theme === "`+theme+`" && document.getElementById("state").offsetParent !== null`))
		if err == nil {
			state, err = chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#state`)))
		}
		if err == nil && shots != "" {
			err = thShot(tab, theme, filepath.Join(shots, "waiting-"+theme+".png"))
		}
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", theme, err)
		}
		known := false
		for _, p := range []string{wakerecord.Queued, wakerecord.Starting, wakerecord.Probing} {
			known = known || state == route.PhaseText(p)
		}
		if !known {
			t.Errorf("%s: the page says %q; want a phase's sentence", theme, state)
		}
		testbin.Eventually(t, theme+": the home's own page", func() bool {
			ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.body !== null && document.body.textContent.indexOf("wakegate demo home") >= 0`))
			return err == nil && ok
		})
		seen, _, err := wtSeen(tab)
		if err != nil || len(seen) < 2 || !strings.HasPrefix(seen[0], "page:") || seen[len(seen)-1] != wakerecord.Ready {
			t.Errorf("%s: phases seen %v (%v); want the waiting page, then ready", theme, seen, err)
		}
		if v, err := chromedp.Run(tab, chromedp.Evaluate[string](`sessionStorage.getItem("csp") || "[]"`)); err != nil || v != "[]" {
			t.Errorf("%s: Content-Security-Policy violations: %s (%v)", theme, v, err)
		}
		cancel()
	}
}

// thViewport is the window a theme is shown in: a small box for the
// minimal theme, meant for an iframe; a small window for the others.
func thViewport(theme string) (width, height int64) {
	if theme == "minimal" {
		return 420, 110
	}
	return 720, 420
}

// thShot writes a PNG screenshot of tab's window to path, provided the
// page is still the waiting page of theme once it is taken.
func thShot(tab context.Context, theme, path string) error {
	shot, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	still, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.body.dataset.theme === "`+theme+`"`))
	if err != nil || !still {
		return errors.Join(err, errors.New("the page was no longer the waiting page when the screenshot was taken"))
	}
	if len(shot) > 100<<10 {
		return fmt.Errorf("screenshot of %d bytes; keep it under 100 KB", len(shot))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, shot, 0o644)
}

// TestAdminAppWaitingTheme: an app registered through the admin API takes
// a waiting_theme, held to the config's names: an unknown one is a 400
// naming the field and the valid names, and registers nothing; a known
// one is taken.
func TestAdminAppWaitingTheme(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	code, body := admRaw(t, a, "PUT", "/admin/apps/themed", `{"upstream":"http://127.0.0.1:1","waiting_theme":"neon"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), `"waiting_theme"`) ||
		!strings.Contains(string(body), "want one of default, plain, dark, minimal") {
		t.Errorf("an unknown theme: %d %s; want 400 naming waiting_theme and the themes", code, body)
	}
	if code, _, body := a.do(t, "GET", "/admin/apps/themed", admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("GET after the refused app: %d %s", code, body)
	}
	if code, body := admRaw(t, a, "PUT", "/admin/apps/themed", `{"upstream":"http://127.0.0.1:1","waiting_theme":"dark"}`); code >= 300 {
		t.Fatalf("a known theme: %d %s", code, body)
	}
}
