package route

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wakerecord"
)

// The request path asks the lifecycle engine, the app observer, the
// session count and the data plane for what it needs through the small
// interfaces below; the gateway hands it values that implement them and
// checks that they do (gateway/capabilities.go).

// Engine is what the request path asks of the lifecycle engine.
type Engine interface {
	// WarmAwake returns home id's endpoint when its warm verdict is fresh:
	// the warm path's one lookup, asked before any deadline is built.
	WarmAwake(id string) (homes.Awake, bool)
	// EnsureAwake makes home id ready, joining or starting its one wake
	// (DESIGN rules 1, 2), and returns where it listens.
	EnsureAwake(ctx context.Context, id string) (homes.Awake, error)
	// EnsureQueued is EnsureAwake for a home whose provider can hold
	// connections while it boots: it may release the caller before the
	// probe passed.
	EnsureQueued(ctx context.Context, id string) (homes.Awake, error)
	// Settled waits for the outcome of the wake a caller was released
	// from before its probe passed (Awake.Queued).
	Settled(ctx context.Context, id string, a homes.Awake) (*url.URL, error)
	// Redo drops home id's warm verdict after a failed forward and wakes
	// it once more.
	Redo(ctx context.Context, id string) (*url.URL, error)
	// Warm reports whether home id has a fresh warm verdict.
	Warm(id string) bool
	// Sleeping reports whether home id is known to sleep.
	Sleeping(id string) bool
	// Start begins a wake of home id in the background.
	Start(id string) error
	// HomeState returns what the store and the engine know of home id.
	HomeState(ctx context.Context, id string) (homes.State, error)
	// View is where the wake of home id stands.
	View(id string) (wakerecord.View, bool)
	// ExpectedWake is how long a wake of home id is expected to take.
	ExpectedWake(id string) time.Duration
	// Ready takes home id's ready signal if token is its relay token.
	Ready(id, token string) bool
	// HomeForToken names the home whose relay token is token.
	HomeForToken(token string) (string, bool)
	// Changed returns a channel closed at the next change of key (a home's
	// id or an app's slug).
	Changed(key string) <-chan struct{}
}

// Observer is what the request path asks of the app observer: statuses,
// refreshes and the desired state of apps.
type Observer interface {
	Status(slug string) (appstatus.Status, bool)
	Stopped(slug string) bool
	Refresh(ctx context.Context, slug string, waitFor appstatus.Phase) (appstatus.Status, error)
	RefreshSince(ctx context.Context, slug string, since time.Time) (appstatus.Status, error)
}

// Sessions counts the sessions of homes (DESIGN rule 8's session count):
// one Begin, one End per forwarded request, a WebSocket marked as such
// while its relay runs.
type Sessions interface {
	Begin(id string) *sessions.Counter
	End(c *sessions.Counter)
	MarkWebSocket(c *sessions.Counter)
	UnmarkWebSocket(c *sessions.Counter)
}

// Forwarder forwards a request along its route (the data plane).
type Forwarder interface {
	Serve(w http.ResponseWriter, r *http.Request, route *forward.Route)
}
