package probe

import "time"

// The readiness probe's defaults (Spec documents each) and its own
// bounds.
const (
	probeDefaultAttemptTimeout = 2 * time.Second
	probeDefaultWSTimeout      = time.Second
	probeDefaultSettle         = 300 * time.Millisecond
	probeDefaultMinPause       = 2 * time.Millisecond
	probeDefaultMaxPause       = 100 * time.Millisecond
	probeDefaultPortWatch      = 2 * time.Millisecond

	// DrainLimit bounds how much of a response body a probe or a health
	// check reads before it closes the body.
	DrainLimit = 64 << 10
	// probeCloseWait bounds the write of the WebSocket close frame.
	probeCloseWait = 100 * time.Millisecond
)
