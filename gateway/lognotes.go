package gateway

import (
	"log/slog"
	"net/http"
	"strings"
)

// accessLevel is the level of a request's access line: the gateway's own
// routes that something polls (the waiting page's status and stream under
// /_wakegate/, /healthz and /readyz from a load balancer) are logged at
// debug while they succeed, so that one wake or one health check does not
// write a dozen lines; everything else, and any of them that fails, at
// info.
func accessLevel(path string, status int) slog.Level {
	if status < http.StatusBadRequest &&
		(strings.HasPrefix(path, "/_wakegate/") || path == "/healthz" || path == "/readyz") {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
