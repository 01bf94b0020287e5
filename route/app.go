package route

import (
	"net/url"
	"sync/atomic"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/registry"
)

// App is one app's entry in the app route table, as the request path
// reads it. It starts as a candidate: only the self-probe reaches it until
// a passing self-probe publishes it (DESIGN rule 14). A changed app gets a
// new App; what one holds never changes, except whether it is published
// and its pulse.
type App struct {
	cfg      registry.App
	upstream *url.URL // apps outside homes
	home     *Home    // apps inside a home
	prefix   string   // "/apps/{slug}"
	// gen is the stored generation of an app registered through the admin
	// API; 0 for an app of the config.
	gen       uint64
	published atomic.Bool
	// pulse records the app's answers to forwarded requests (passive
	// observations); set once the observer has the app.
	pulse atomic.Pointer[appstatus.Pulse]
}

// NewApp returns the candidate route of ac, whose defaults are filled and
// which passed its checks, with stored generation gen; home is the home ac
// runs in (nil for an app with an upstream).
func NewApp(ac registry.App, gen uint64, home *Home) *App {
	a := &App{cfg: ac, prefix: "/apps/" + ac.Slug, gen: gen, home: home}
	if ac.Upstream != "" {
		a.upstream, _ = url.Parse(ac.Upstream) // checked by registry.App.Check
		a.home = nil
	}
	return a
}

// Config is the app as registered; the caller must not change it.
func (a *App) Config() *registry.App { return &a.cfg }

// Slug is the name in /apps/{slug}.
func (a *App) Slug() string { return a.cfg.Slug }

// Upstream is where an app outside any home is served (nil for an app in
// a home).
func (a *App) Upstream() *url.URL { return a.upstream }

// Home is the home the app runs in as it was routed when the app was
// installed (nil for an app with an upstream); the home table has its
// current entry.
func (a *App) Home() *Home { return a.home }

// Prefix is the app's path prefix, "/apps/{slug}".
func (a *App) Prefix() string { return a.prefix }

// Generation is the stored generation of an app registered through the
// admin API, 0 for an app of the config.
func (a *App) Generation() uint64 { return a.gen }

// Published reports whether everyone may reach the app (else only the
// self-probe does).
func (a *App) Published() bool { return a.published.Load() }

// SetPublished publishes the app (or withdraws it) and reports whether it
// was published before.
func (a *App) SetPublished(on bool) (was bool) { return a.published.Swap(on) }

// Pulse is the app's record of answers to forwarded requests.
func (a *App) Pulse() *appstatus.Pulse { return a.pulse.Load() }

// SetPulse sets the app's pulse, once the observer has the app.
func (a *App) SetPulse(p *appstatus.Pulse) { a.pulse.Store(p) }

// HomeID is the id of the home the app runs in, "" for an app with an
// upstream.
func (a *App) HomeID() string {
	if a.home == nil {
		return ""
	}
	return a.home.spec.ID
}
