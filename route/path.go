package route

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/web"
)

// Path is the request path of homes and apps: /node/{target}/...,
// /apps/{slug}/..., their host-routed names, the waiting page and its
// status, a home's ready signal. A request walks it once: route, access
// gate, session, warm verdict or wake, home connection, proxy. It reads
// the home and app tables and the wake engine, and calls nothing back in
// the gateway that built it.
type Path struct {
	homes    Homes
	apps     Apps
	observer Observer
	engine   Engine
	sessions Sessions
	proxy    Forwarder
	conns    *HomeConns
	gate     *Gate
	records  HomeRecords
	verdicts Verdicts
	log      *slog.Logger
	drain    <-chan struct{}

	relayHeader  string
	rootRedirect string
	hosts        hostDomains
	set          atomic.Pointer[Settings]
}

// Homes is the home table as the request path reads it
// (control.HomeTable): one read-locked map hit per lookup.
type Homes interface {
	// At returns the home routed at /node/{target}.
	At(target string) (*Home, bool)
	// WithID returns the home with id as it is now routed.
	WithID(id string) (*Home, bool)
}

// Apps is the app route table as the request path reads it.
type Apps interface {
	// App returns the route of slug, or nil.
	App(slug string) *App
}

// HomeRecords reads a home's stored record (registry.Store).
type HomeRecords interface {
	GetHome(ctx context.Context, id string) (registry.Home, error)
}

// Verdicts drops a home's warm verdict, here and, in a fleet, on the
// other gateways.
type Verdicts interface {
	Drop(id string)
}

// Exchange is what the listener's response writer records of a request
// that the request path adds to. A writer that is not one (a test's)
// records nothing.
type Exchange interface {
	// Route is the request's one route, allocated with the writer.
	Route() *forward.Route
	// AtEnd has f run when the request is over, which may be after its
	// handler returned (a WebSocket relay).
	AtEnd(f func())
	// Forwarding notes that the request is being forwarded now, after
	// any wake wait.
	Forwarding()
	// Answer is the status the request was answered with (0 before an
	// answer), when it was forwarded and when its response headers were
	// written.
	Answer() (status int, fwd, headerAt time.Time)
}

// Settings are the request path's reloadable settings, as values.
type Settings struct {
	// Hold is how long a browser's navigation waits for a wake before
	// the waiting page (wake.hold).
	Hold time.Duration
	// WakeTimeout bounds an API or WebSocket caller's wait for a wake.
	WakeTimeout time.Duration
	// RetryAfter is the Retry-After of answers that ask to come back.
	RetryAfter time.Duration
	// ReadyTimeout is a home's default ready timeout (its own, when set,
	// wins).
	ReadyTimeout time.Duration
	// HomeResponseHeaderTimeout bounds a forward's wait for a home's
	// response headers (proxy.home_response_header_timeout).
	HomeResponseHeaderTimeout time.Duration
	// NoWakePaths and NoWakeAgents are the requests that never wake a
	// sleeping home: paths inside the home, user agents.
	NoWakePaths  []string
	NoWakeAgents []*regexp.Regexp
	// Waiting is the gateway's waiting page: the operator's own or a
	// built-in theme; nil for the default one.
	Waiting *web.WaitingTemplate
	// Names gives a home's display name and waiting theme ("" for none).
	Names HomePages
}

// HomePages gives what a home's waiting page shows of it: its display
// name and its built-in theme, "" for none (config.Config).
type HomePages interface {
	DisplayName(id string) string
	WaitingTheme(id string) string
}

// Options are what a Path is built from; every field is required unless
// its comment says otherwise.
type Options struct {
	Homes    Homes
	Apps     Apps
	Observer Observer // statuses, refreshes and waits of apps
	Engine   Engine
	Sessions Sessions
	Proxy    Forwarder
	Conns    *HomeConns
	Gate     *Gate
	Records  HomeRecords
	Verdicts Verdicts
	Log      *slog.Logger
	// Drain is closed when the gateway starts draining: status streams
	// end.
	Drain <-chan struct{}
	// RelayHeader carries a home's relay token (proxy.relay_header).
	RelayHeader string
	// RootRedirect is where GET / redirects ("": a small page).
	RootRedirect string
	// AppsDomain and NodesDomain are the host-routing domains ("": off).
	AppsDomain, NodesDomain string
	Settings                Settings
}

// New returns the request path over o.
func New(o Options) *Path {
	p := &Path{homes: o.Homes, apps: o.Apps, observer: o.Observer, engine: o.Engine, sessions: o.Sessions,
		proxy: o.Proxy, conns: o.Conns, gate: o.Gate, records: o.Records, verdicts: o.Verdicts, log: o.Log,
		drain: o.Drain, relayHeader: o.RelayHeader, rootRedirect: o.RootRedirect,
		hosts: hostDomains{apps: o.AppsDomain, nodes: o.NodesDomain}}
	p.SetSettings(o.Settings)
	return p
}

// SetSettings replaces the reloadable settings; requests under way keep
// the ones they read.
func (p *Path) SetSettings(s Settings) { p.set.Store(&s) }

// conf is the settings now.
func (p *Path) conf() *Settings { return p.set.Load() }

// current returns the entry of h's home as it is now (a home replaced
// through the admin API has a new entry; apps keep the one they were built
// with).
func (p *Path) current(h *Home) *Home {
	if cur, ok := p.homes.WithID(h.spec.ID); ok {
		return cur
	}
	return h
}

// app returns the app routed at /apps/{slug}.
func (p *Path) app(slug string) (*App, bool) {
	a := p.apps.App(slug)
	return a, a != nil
}

// published reports whether a is the route of its slug and is published
// (a replaced route is not, whatever it was).
func (p *Path) published(a *App) bool {
	return p.apps.App(a.cfg.Slug) == a && a.Published()
}

// exchange is the Exchange w records, nil when it is not one.
func exchange(w http.ResponseWriter) Exchange {
	x, _ := w.(Exchange)
	return x
}

// newRoute returns the route of the request served through w: the one
// its Exchange holds, else a new one. A request makes one route.
func newRoute(w http.ResponseWriter, kind, name string) *forward.Route {
	var route *forward.Route
	if x := exchange(w); x != nil {
		route = x.Route()
	} else {
		route = &forward.Route{}
	}
	route.Kind, route.Name = kind, name
	return route
}

// atEnd has f run when the request served through w is over, when w is
// an Exchange; it reports whether it is.
func atEnd(w http.ResponseWriter, f func()) bool {
	x := exchange(w)
	if x != nil {
		x.AtEnd(f)
	}
	return x != nil
}

// markForward notes on w's Exchange that the request is being forwarded
// now (after any wake wait).
func markForward(w http.ResponseWriter) {
	if x := exchange(w); x != nil {
		x.Forwarding()
	}
}

// hooks returns h's hooks, made on its first forward: a failed forward
// drops the home's warm verdict, and a replayable one is retried once
// after a fresh wake.
func (p *Path) hooks(h *Home) *Hooks {
	return h.HooksOr(func() *Hooks {
		id := h.spec.ID
		return &Hooks{
			OnFailure: func() { p.verdicts.Drop(id) },
			Retry: func(ctx context.Context) (*url.URL, error) {
				ctx, cancel := context.WithTimeout(ctx, p.conf().WakeTimeout)
				defer cancel()
				return p.engine.Redo(ctx, id)
			},
		}
	})
}

// selfProbeKey marks the context of a request that is the gateway's own
// self-probe.
type selfProbeKey struct{}

// MarkSelfProbe returns r marked as the gateway's own self-probe; only the
// listener's hygiene, having proven it (DESIGN rule 14), calls it.
func MarkSelfProbe(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), selfProbeKey{}, true))
}

// IsSelfProbe reports whether r is the gateway's own self-probe.
func IsSelfProbe(r *http.Request) bool {
	v, _ := r.Context().Value(selfProbeKey{}).(bool)
	return v
}
