package gateway

import (
	"net/http"

	"github.com/wakegate/wakegate/route"
)

// notePassive records, after a request for app was forwarded, that the app
// answered it (a passive observation, wake.AppPulse): any status the
// upstream sent below 500, except the gateway's own answers to the
// caller's body (408, 413). It reads what the recorder already holds: no
// clock read, lock or allocation on the request path.
func notePassive(w http.ResponseWriter, app *route.App) {
	rw, ok := w.(*recorder)
	if !ok || rw.fwd.IsZero() || rw.status == 0 || rw.status >= http.StatusInternalServerError ||
		rw.status == http.StatusRequestTimeout || rw.status == http.StatusRequestEntityTooLarge {
		return
	}
	app.Pulse().Beat(rw.headerAt)
}
