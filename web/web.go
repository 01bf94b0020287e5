// Package web holds wakegate's embedded pages: the waiting page shown to
// browsers while a home wakes (the page of DESIGN rule 7, in its built-in
// themes), and the admin dashboard.
package web

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

//go:embed waiting.html themes/*.css dashboard.html dashboard.js dashboard.css
var files embed.FS

// The built-in waiting pages are one page, waiting.html, dressed by one
// style sheet per theme (themes/{name}.css): every theme shows the same
// markup, phases and script.
const (
	// ThemeDefault is the page that follows the browser's light or dark
	// preference.
	ThemeDefault = "default"
	// ThemePlain is a light page that looks like a plain document.
	ThemePlain = "plain"
	// ThemeDark is a dark page, whatever the browser prefers.
	ThemeDark = "dark"
	// ThemeMinimal is the phase and a thin bar on a transparent
	// background, no heading and no steps: for an iframe. It is the one
	// page that pages of the gateway's own origin may frame.
	ThemeMinimal = "minimal"
)

// themeNames are the built-in themes in the order the docs list them.
var themeNames = []string{ThemeDefault, ThemePlain, ThemeDark, ThemeMinimal}

var themes = builtinThemes()

var defaultWaiting = themes[ThemeDefault]

// builtinThemes parses waiting.html once and pairs it with each theme's
// style sheet.
func builtinThemes() map[string]*WaitingTemplate {
	page := template.Must(template.ParseFS(files, "waiting.html"))
	m := make(map[string]*WaitingTemplate, len(themeNames))
	for _, name := range themeNames {
		css, err := files.ReadFile("themes/" + name + ".css")
		if err != nil {
			panic(err) // embedded: a missing sheet is a build mistake
		}
		m[name] = &WaitingTemplate{t: page, theme: name, css: template.CSS(css), frameable: name == ThemeMinimal}
	}
	return m
}

// ThemeNames returns the names of the built-in waiting pages, the default
// first.
func ThemeNames() []string { return append([]string(nil), themeNames...) }

// CheckTheme says what is wrong with a waiting_theme value: nil for empty
// (the level above decides) or a built-in theme's name, else an error
// that lists the valid names.
func CheckTheme(name string) error {
	if _, ok := themes[name]; name != "" && !ok {
		return fmt.Errorf("unknown theme %q: want one of %s", name, strings.Join(themeNames, ", "))
	}
	return nil
}

// Theme returns the built-in waiting page named name; ok is false for any
// name that is not one of ThemeNames.
func Theme(name string) (wt *WaitingTemplate, ok bool) {
	wt, ok = themes[name]
	return wt, ok
}

// Waiting is what the waiting page shows. It is also what an operator's
// own template (wake.waiting_page) is given; html/template escapes every
// value in its context.
type Waiting struct {
	// Name is the home's display name (or the app's slug).
	Name string
	// Phase is where the wake stands as the page is served: "queued",
	// "starting", "health-pending", "probing", or "failed" (then Code and Message say why).
	Phase string
	// PhaseText is Phase as a sentence for people.
	PhaseText string
	// StatusURL is the home's public status stream: Server-Sent Events
	// (event "phase", data {"phase", "elapsed_ms", ...}) when asked for
	// text/event-stream, one JSON object otherwise.
	StatusURL string
	// RefreshURL is where a page without JavaScript reloads to (meta
	// refresh): it shows this page again while the home wakes, and sends
	// the browser back to RetryURL once it is ready. It never starts a wake.
	RefreshURL string
	// RefreshSeconds is the meta refresh's period.
	RefreshSeconds int
	// RetryURL is the page the browser asked for; loading it again is the
	// retry after a failure.
	RetryURL string
	// RequestID is the request's id, which the gateway's log carries too.
	RequestID string
	// Elapsed is how long the wake has run; Expected how long this home's
	// wakes usually take (zero: not known yet).
	Elapsed, Expected time.Duration
	// Code and Message are the public code and sentence of a failed wake.
	Code, Message string
	// Nonce is this answer's Content-Security-Policy nonce: a <script> or
	// <style> element of the page runs only with nonce="{{.Nonce}}"
	// (WaitingCSP).
	Nonce string
}

// WaitingCSP is the waiting page's Content-Security-Policy: its own
// scripts and styles under nonce, its status stream on its own origin,
// images from its own origin, nothing else, and no framing.
func WaitingCSP(nonce string) string { return waitingCSP(nonce, "'none'") }

// waitingCSP is WaitingCSP with the frame-ancestors source ancestors.
func waitingCSP(nonce, ancestors string) string {
	return "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce + "'; " +
		"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors " + ancestors
}

// NewNonce returns a fresh Content-Security-Policy nonce (128 random bits).
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// WaitingTemplate renders a waiting page: a built-in theme or an
// operator's own template.
type WaitingTemplate struct {
	t *template.Template
	// theme and css are a built-in page's theme name and style sheet
	// ("" for an operator's template).
	theme string
	css   template.CSS
	// frameable lets pages of the gateway's own origin frame the page.
	frameable bool
}

// DefaultWaiting is the built-in waiting page (ThemeDefault).
func DefaultWaiting() *WaitingTemplate { return defaultWaiting }

// Theme is the built-in theme's name, "" for an operator's template.
func (wt *WaitingTemplate) Theme() string { return wt.theme }

// CSP is the page's Content-Security-Policy for nonce: WaitingCSP, except
// that the minimal theme may be framed by the gateway's own origin
// (frame-ancestors 'self').
func (wt *WaitingTemplate) CSP(nonce string) string {
	if wt.frameable {
		return waitingCSP(nonce, "'self'")
	}
	return WaitingCSP(nonce)
}

// FrameOptions is the page's X-Frame-Options: SAMEORIGIN where CSP lets
// the gateway's own origin frame it, DENY otherwise.
func (wt *WaitingTemplate) FrameOptions() string {
	if wt.frameable {
		return "SAMEORIGIN"
	}
	return "DENY"
}

// ParseWaiting parses an operator's waiting page, an html/template named
// name, and renders it once with sample values so that a reference to a
// variable that does not exist fails here rather than for a visitor.
func ParseWaiting(name, text string) (*WaitingTemplate, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	wt := &WaitingTemplate{t: t}
	sample := Waiting{Name: "sample", Phase: "starting", PhaseText: "Starting…", StatusURL: "/_wakegate/wake/node/sample",
		RefreshURL: "/_wakegate/wake/node/sample?to=%2F", RefreshSeconds: 3, RetryURL: "/", RequestID: "sample-1", Nonce: "c2FtcGxlLW5vbmNl"}
	if err := wt.Render(io.Discard, sample); err != nil {
		return nil, err
	}
	return wt, nil
}

// Render writes the page for d.
func (wt *WaitingTemplate) Render(w io.Writer, d Waiting) error {
	return wt.t.Execute(w, waitingData{Waiting: d, Theme: wt.theme, ThemeCSS: wt.css,
		ElapsedMS: d.Elapsed.Milliseconds(), ExpectedMS: d.Expected.Milliseconds(), Failed: d.Phase == "failed",
		ExpectedText: strconv.FormatFloat(d.Expected.Seconds(), 'f', 1, 64) + " s"})
}

// waitingData is Waiting with the values templates read most easily.
type waitingData struct {
	Waiting
	// ElapsedMS and ExpectedMS are Elapsed and Expected in milliseconds.
	ElapsedMS, ExpectedMS int64
	// ExpectedText is Expected for people, e.g. "2.1 s".
	ExpectedText string
	// Failed is true when Phase is "failed".
	Failed bool
	// Theme and ThemeCSS are a built-in page's theme and its style sheet
	// (empty for an operator's template).
	Theme    string
	ThemeCSS template.CSS
}

// WaitingPage renders the built-in waiting page.
func WaitingPage(w io.Writer, d Waiting) error { return defaultWaiting.Render(w, d) }

// DashboardCSP is the dashboard's Content-Security-Policy: everything from
// its own origin, nothing from anywhere else (it works offline).
const DashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Dashboard returns the admin dashboard's page.
func Dashboard() []byte {
	b, _ := files.ReadFile("dashboard.html") // embedded: cannot fail
	return b
}

// DashboardAsset returns one of the dashboard's scripts or style sheets and
// its content type; ok is false for any other name.
func DashboardAsset(name string) (body []byte, contentType string, ok bool) {
	var ctype string
	switch name {
	case "dashboard.js":
		ctype = "text/javascript; charset=utf-8"
	case "dashboard.css":
		ctype = "text/css; charset=utf-8"
	default:
		return nil, "", false
	}
	b, err := files.ReadFile(name)
	return b, ctype, err == nil
}
