package route

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/wakerecord"
)

// The waiting page's status stream and the pieces of its public status
// that need nothing of the gateway (DESIGN rule 7). The gateway finds the
// home or app a page waits for, admits its callers and renders the page;
// what a stream watches comes in through WaitSource.

const (
	// waitRefreshEvery is how often a status stream asks for a fresh
	// observation of an app whose home is ready.
	waitRefreshEvery = 500 * time.Millisecond
	// waitStreamMax ends a status stream; the browser's EventSource
	// connects again after waitRetryMS.
	waitStreamMax = 5 * time.Minute
	// waitKeepAlive is the longest silence on a status stream (a comment
	// line keeps proxies in front from closing it).
	waitKeepAlive = 15 * time.Second
	// waitRetryMS is the EventSource reconnection delay the stream asks for.
	waitRetryMS = 2000
	// WaitRefreshSeconds is the meta refresh period of a page without
	// JavaScript.
	WaitRefreshSeconds = 2
)

// WaitReport is one report of the status: all that the public learns.
type WaitReport struct {
	// Ready is true once the page may load its URL again (kept for pages
	// that predate Phase).
	Ready     bool   `json:"ready"`
	Phase     string `json:"phase"`
	ElapsedMS int64  `json:"elapsed_ms,omitempty"`
	// Code, Error and RequestID are a failure's public answer.
	Code      string `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// WaitSource is what a status stream watches: one home, or one app and
// the home it lives in.
type WaitSource interface {
	// Changed returns channels that close at the next change of the
	// subject's home and of the app (nil for none). The stream calls it
	// before View, so a change after the view was read is never missed.
	Changed() (home, app <-chan struct{})
	// View is where the wake stands; refresh asks for a fresh
	// observation of an app whose home is ready (it never wakes a home).
	View(ctx context.Context, refresh bool) wakerecord.View
	// Report is v as the public may see it; a failure's cause goes to
	// the log with r's request id.
	Report(r *http.Request, v wakerecord.View) WaitReport
}

// PhaseText is a phase as the page says it before its script runs.
func PhaseText(phase string) string {
	switch phase {
	case wakerecord.Queued:
		return "Waiting for a free slot…"
	case wakerecord.HealthPending:
		return "Waiting for the container's health check…"
	case wakerecord.Probing:
		return "Checking that it answers…"
	case wakerecord.Ready, wakerecord.Asleep:
		return "Opening…"
	case wakerecord.Failed:
		return "The start failed."
	}
	return "Starting…"
}

// LocalPath reports whether p is a path on this site: it starts with one
// slash and holds no backslash or control character, so a redirect to it
// never leaves the site.
func LocalPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\") {
		return false
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// terminalPhase reports whether a status stream ends after phase.
func terminalPhase(phase string) bool {
	return phase == wakerecord.Ready || phase == wakerecord.Failed || phase == wakerecord.Asleep
}

// StreamWake serves src's status as Server-Sent Events: an event "phase"
// at once and at every change of phase, until one that ends the wait
// (ready, failed, asleep), the caller leaves, drain closes, or
// waitStreamMax passes. It looks again only when src says that something
// changed for its home or app (events.Bus.Changed, which never drops), and,
// when refreshes is set (an app), every waitRefreshEvery to ask for a
// fresh observation of the app.
func StreamWake(w http.ResponseWriter, r *http.Request, src WaitSource, refreshes bool, drain <-chan struct{}) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: " + strconv.Itoa(waitRetryMS) + "\n\n")); err != nil {
		return
	}
	end := time.NewTimer(waitStreamMax)
	defer end.Stop()
	keepAlive := time.NewTimer(waitKeepAlive)
	defer keepAlive.Stop()
	var refreshC <-chan time.Time
	if refreshes {
		t := time.NewTicker(waitRefreshEvery)
		defer t.Stop()
		refreshC = t.C
	}
	ctx := r.Context()
	var last string
	refresh := true
	for {
		// Watched before the view is read: a change after this point
		// closes one of them.
		homeChanged, appChanged := src.Changed()
		v := src.View(ctx, refresh)
		refresh = false
		var out []byte
		if key := v.Phase; key != last {
			last = key
			b, _ := json.Marshal(src.Report(r, v))
			out = append(append(append(out, "event: phase\ndata: "...), b...), "\n\n"...)
		}
		if out != nil {
			if !writeStream(w, rc, out) {
				return
			}
			keepAlive.Reset(waitKeepAlive)
		}
		if terminalPhase(v.Phase) || closed(drain) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-drain:
			return
		case <-keepAlive.C:
			if !writeStream(w, rc, []byte(": keep-alive\n\n")) {
				return
			}
			keepAlive.Reset(waitKeepAlive)
		case <-homeChanged:
		case <-appChanged:
		case <-refreshC:
			refresh = true
		}
	}
}

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// writeStream writes b to a status stream and flushes it; false when the
// caller is gone.
func writeStream(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}
