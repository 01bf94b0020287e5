// Package web holds wakegate's embedded pages: the waiting page shown to
// browsers while a home wakes (and, later, the admin dashboard).
package web

import (
	"embed"
	"html/template"
	"io"
	"time"
)

//go:embed waiting.html
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
