// Package forward names where one request goes: the Route the request
// path resolves (an app's or a home's upstream, with the home's relay
// token and the hooks of the warm path) and hands to the data plane
// (package proxy), which forwards the request along it. Both import it
// from here, so that the request path names no type of the data plane.
//
// It holds no DESIGN rule of its own: the forward along a route and its
// rules (6, 22, 35) live in package proxy, the resolving of a route and
// the wake before it in package route.
package forward

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Route is where one request goes.
type Route struct {
	// Kind is "app" or "node", for logs and metrics.
	Kind string
	// Name is the app slug or home target.
	Name string
	// HomeID is the home whose sessions this request counts ("" for none).
	HomeID string
	// Upstream is the base URL to forward to.
	Upstream *url.URL
	// StripPrefix is removed from the path before forwarding ("" for none).
	StripPrefix string
	// RelayToken is sent in the relay header toward this upstream only, and
	// masked wherever it appears in the response.
	RelayToken string
	// Retry, if set, is called once when the upstream could not be reached
	// before any response; it returns a fresh upstream (after a new wake)
	// and the request is retried once if it can be replayed.
	Retry func(ctx context.Context) (*url.URL, error)
	// Queued says Upstream is a home not yet proven ready, whose socket
	// queues the request while it boots (a wake's early release). An
	// upstream that closes such a connection before any byte of an answer
	// did not serve it (a boot that failed, or a stop when its wake
	// failed): with Retry, it is unreached, not a bad gateway.
	Queued bool
	// OnFailure, if set, is called when a forward to Upstream fails with no
	// response (a transport error while the caller is still there),
	// whether or not the request can be replayed, and again when its
	// replay fails. The gateway drops the home's warm verdict there, so
	// that the next request wakes or probes the home again.
	OnFailure func()
	// Waited is how long the request waited for a wake; when positive it is
	// reported as Server-Timing: wake;dur=<ms>.
	Waited time.Duration
	// Acquire, if set, takes one of the upstream's forwarding slots for
	// r, once r's body has been read ahead (the data plane's spool), and
	// returns the function that gives it back. When it gets none it has
	// answered w itself and returns ok false.
	Acquire func(w http.ResponseWriter, r *http.Request) (release func(), ok bool)
}
