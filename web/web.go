// Package web holds wakegate's embedded pages: the waiting page shown to
// browsers while a home wakes, and the admin dashboard.
package web

import (
	"embed"
	"html/template"
	"io"
	"time"
)

//go:embed waiting.html dashboard.html dashboard.js dashboard.css
var files embed.FS

var waitingTmpl = template.Must(template.ParseFS(files, "waiting.html"))

// Waiting is what the waiting page shows.
type Waiting struct {
	// Name is the home or app being woken.
	Name string
	// StatusURL is polled for progress; it answers {"ready": bool, ...}.
	StatusURL string
	// Timeout is how long a wake may take before the page gives up.
	Timeout time.Duration
}

// WaitingPage renders the waiting page. It reloads the page by itself once
// the status URL says the home is ready.
func WaitingPage(w io.Writer, d Waiting) error {
	return waitingTmpl.Execute(w, map[string]any{
		"Name": d.Name, "StatusURL": d.StatusURL, "TimeoutMS": d.Timeout.Milliseconds(),
	})
}

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
