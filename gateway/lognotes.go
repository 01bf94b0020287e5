package gateway

import (
	"log/slog"
	"net/http"
	"strings"
)

// accessLevel is the level of r's access line: the gateway's own routes
// that something polls (the waiting page's status polls and refreshes
// under /_wakegate/, /healthz and /readyz from a load balancer) are logged
// at debug while they succeed, so that one wake or one health check does
// not write a dozen lines; everything else at info, including any of them
// that fails and the waiting page's status stream (one per page view).
func accessLevel(r *http.Request, status int) slog.Level {
	p := r.URL.Path
	polled := strings.HasPrefix(p, "/_wakegate/") || p == "/healthz" || p == "/readyz"
	if polled && status < http.StatusBadRequest && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
