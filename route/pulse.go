package route

import (
	"net/http"
)

// notePassive records, after a request for app was forwarded, that the app
// answered it (a passive observation, appstatus.Pulse): any status the
// upstream sent below 500, except the gateway's own answers to the
// caller's body (408, 413). It reads what w's Exchange already holds: no
// clock read, lock or allocation on the request path.
func notePassive(w http.ResponseWriter, app *App) {
	x := exchange(w)
	if x == nil {
		return
	}
	status, fwd, headerAt := x.Answer()
	if fwd.IsZero() || status == 0 || status >= http.StatusInternalServerError ||
		status == http.StatusRequestTimeout || status == http.StatusRequestEntityTooLarge {
		return
	}
	app.Pulse().Beat(headerAt)
}
