package probe

import (
	"errors"
	"net/http"
)

// Hint is the operator's likely fix for a failed probe whose error is in
// err's chain, or "" when err holds no probe's answer: for an auto
// attempt, what its upgrade and GETs got; for a status a ws or http
// attempt got, what that status usually means.
func Hint(err error) string {
	if ae, ok := errorsAsAuto(err); ok {
		return autoHint(ae)
	}
	return StatusHint(err)
}

// AutoHint is Hint for an auto attempt's error alone: ok is false when
// err holds none.
func AutoHint(err error) (hint string, ok bool) {
	ae, ok := errorsAsAuto(err)
	if !ok {
		return "", false
	}
	return autoHint(ae), true
}

// StatusHint is the likely fix for an error status a ws or http attempt
// got, or "" when err holds none.
func StatusHint(err error) string {
	var ps StatusError
	if !errors.As(err, &ps) {
		return ""
	}
	switch {
	case int(ps) == http.StatusNotFound && errors.Is(err, errWSProbe):
		return "the home answered 404 to the WebSocket readiness probe at /node/{target}: if it does not serve WebSockets there, " +
			"set probe: auto (tries a WebSocket upgrade, then HTTP GETs) or probe: http for it"
	case int(ps) == http.StatusNotFound:
		return "the home answered 404 to the readiness probe: check the probe path"
	case int(ps) == http.StatusUnauthorized || int(ps) == http.StatusForbidden:
		return "the home refused the probe's credentials: check the home's relay token"
	}
	return "the home answered the readiness probe with an error status: see the home's log"
}

// autoHint is the likely fix for a failed auto attempt.
func autoHint(ae *autoProbeError) string {
	if ae.broker {
		return "the home accepted the WebSocket upgrade at /node/{target} and closed the socket within the settle window " +
			"(wake.probe.settle): a broker that drops sockets is not ready, and no GET vouches for it; see the home's log, " +
			"or, if the home is not a WebSocket service at that path, set its probe kind to http (homes[].probe.kind)"
	}
	if ae.allNotFound() {
		return "the home answers HTTP but 404 at /node/{target} to both a WebSocket upgrade and a GET: " +
			"the gateway forwards /node/{target}/... with that prefix kept, so serve under that path, " +
			"or reach the home through an app (apps[].home) with strip_prefix: true, whose health path the probe then tries too"
	}
	var ps StatusError
	if errors.As(ae, &ps) && (int(ps) == http.StatusUnauthorized || int(ps) == http.StatusForbidden) {
		return "the home refused the probe's credentials: check the home's relay token"
	}
	if ae.unanswered {
		return "the home left the WebSocket upgrade at /node/{target} unanswered (wake.probe.ws_timeout) and its GETs did not pass: " +
			"set its probe to http with a path it answers 2xx or 3xx (homes[].probe: {kind: http, path: ...})"
	}
	return "the home answered the readiness probe, but no answer passed (2xx or 3xx, or a WebSocket upgrade): " +
		"see the statuses above and the home's log, or set the probe's path (wake.probe.path)"
}
