package registry

import (
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/wakegate/wakegate/web"
)

// App is one app: the same record is an entry of the config file (apps:),
// the body of the admin API's PUT /admin/apps/{slug} and the stored record
// of an app registered through that API. Every field documents its default;
// Default fills them, and Check holds an app to the same rules wherever it
// is declared. A stored app has its defaults filled, so it is registered
// again at start exactly as it was. It lives in registry, the lowest
// package that the config, the admin API and the engine all import, so
// that none of them needs a shape of its own or a mapper to and from it.
type App struct {
	// Slug is the name in /apps/{slug}. Required; 1-63 of [a-z0-9-]
	// starting with a letter or digit. In the admin API it comes from the
	// URL (a body that names another slug is refused).
	Slug string `json:"slug,omitempty" yaml:"slug"`
	// Upstream is the app's base URL (http or https), for apps outside any
	// home. Exactly one of Upstream and Home is set.
	Upstream string `json:"upstream,omitempty" yaml:"upstream"`
	// Home is the id of the home the app runs in; the app wakes it like
	// /node does and is forwarded to the home's endpoint.
	Home string `json:"home,omitempty" yaml:"home"`
	// Kind is "ui" (default) or "api"; it picks error pages or JSON, and
	// the status rules of probes (API routes also pass on 401 and 403).
	Kind string `json:"kind" yaml:"kind"`
	// StripPrefix removes /apps/{slug} from the path before forwarding.
	// Default false: the upstream sees the full path.
	StripPrefix bool `json:"strip_prefix,omitempty" yaml:"strip_prefix"`
	// EncodedSlashes lets a request path hold encoded slashes (%2F) after
	// the app's own prefix, forwarded encoded, for apps that put one in
	// a path segment (RabbitMQ's default virtual host "/", npm scopes,
	// GitLab's project paths). Default false: such a request is refused
	// with 400, as on every other route (docs/routing.md).
	EncodedSlashes bool `json:"encoded_slashes,omitempty" yaml:"encoded_slashes"`
	// WaitingTheme is the built-in waiting page a browser gets while the
	// app wakes: "default", "plain", "dark" or "minimal" (docs/waiting-page.md).
	// Default (and when empty): its home's waiting_theme, else the
	// gateway's wake.waiting_theme or wake.waiting_page.
	WaitingTheme string `json:"waiting_theme,omitempty" yaml:"waiting_theme"`
	// Path is, for an app inside a home, the base path of the app on the
	// home's endpoint: forwarded paths are joined to it, and so is the
	// health path of the direct health check. Default "": the endpoint's
	// root. Not allowed for apps with an upstream (put the path in the URL).
	Path string `json:"path,omitempty" yaml:"path"`
	// Health is how the app's health is checked directly at its upstream.
	Health AppHealth `json:"health" yaml:"health"`
	// DesiredState is "running" (default) or "stopped". A stopped app is
	// never published, answers 503 and does not wake its home.
	DesiredState string `json:"desired_state" yaml:"desired_state"`
	// FailureThreshold is how many observations in a row must fail before
	// a published route is unpublished. Default 3; zero means the default;
	// at least 1.
	FailureThreshold int `json:"failure_threshold" yaml:"failure_threshold"`
	// MinRefresh is how long an observed status is reused before a refresh
	// observes the app again. Default 1s; zero means the default.
	MinRefresh Duration `json:"min_refresh" yaml:"min_refresh"`
	// RefreshTimeout bounds one whole observation (runtime, health check,
	// endpoint and self-probe); past it the refresh returns the last
	// stored status. Default 30s; zero means the default.
	RefreshTimeout Duration `json:"refresh_timeout" yaml:"refresh_timeout"`

	// UpdatedAt is when a stored app was last registered or replaced (set
	// by the gateway; never read from a config or a request).
	UpdatedAt time.Time `json:"updated_at,omitzero" yaml:"-"`
	// Generation counts writes of a stored app; 0 means the record has
	// never been stored (and is the value of every app of the config).
	Generation uint64 `json:"generation,omitempty" yaml:"-"`
	// Owner is the token of the last writer (a gateway instance).
	Owner string `json:"owner,omitempty" yaml:"-"`
}

// AppHealth is an app's health check, run directly against the upstream
// (not through the gateway) every Interval.
type AppHealth struct {
	// Type is "http" (default: GET Path, judged by the app kind's status
	// rules) or "tcp" (a connection opens).
	Type string `json:"type" yaml:"type"`
	// Path is the http check's path. The self-probe requests it under
	// /apps/{slug} through the gateway, and the direct check asks the
	// upstream for the path that request is forwarded to, joined to the
	// upstream URL's path (or the home endpoint and the app's path): Path
	// itself with strip_prefix, else /apps/{slug}{Path}, since an app
	// without strip_prefix is forwarded the whole path and serves under
	// that prefix. Default "/".
	Path string `json:"path" yaml:"path"`
	// Interval is the pause between observations of the app (health check,
	// endpoint and self-probe) while it is not ready, and the first pause
	// once it is. Default 2s; zero means the default.
	Interval Duration `json:"interval" yaml:"interval"`
	// MaxInterval caps the pause between observations of a ready app: it
	// doubles from Interval after every ready observation in a row, and
	// snaps back to Interval on a failed observation or any change of the
	// app's home (a wake, a suspend). A request forwarded to the app that
	// it answered (any status below 500) counts as a passed observation, so
	// an app in use is not health-checked at all. Default 30s; zero means
	// the default; a value at or below Interval turns the backoff off.
	MaxInterval Duration `json:"max_interval" yaml:"max_interval"`
	// Timeout bounds one health check and one self-probe. Default 2s; zero
	// means the default.
	Timeout Duration `json:"timeout" yaml:"timeout"`
	// StartPeriod is the grace after the runtime started during which a
	// failing health check means "starting" rather than "failed". Default
	// 0s: no grace.
	StartPeriod Duration `json:"start_period,omitempty" yaml:"start_period"`
}

// App kinds and desired states.
const (
	AppKindUI  = "ui"
	AppKindAPI = "api"
	AppRunning = "running"
	AppStopped = "stopped"
	HealthHTTP = "http"
	HealthTCP  = "tcp"
)

// Default fills a's unset fields with their defaults (see each field). It is
// the only place an app's defaults are written down.
func (a *App) Default() {
	def(&a.Kind, AppKindUI)
	def(&a.DesiredState, AppRunning)
	def(&a.FailureThreshold, 3)
	def(&a.MinRefresh, Duration(time.Second))
	def(&a.RefreshTimeout, Duration(30*time.Second))
	def(&a.Health.Type, HealthHTTP)
	def(&a.Health.Path, "/")
	def(&a.Health.Interval, Duration(2*time.Second))
	def(&a.Health.MaxInterval, Duration(30*time.Second))
	def(&a.Health.Timeout, Duration(2*time.Second))
}

// def sets *p to v when *p is zero.
func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidSlug reports whether s may name a route: 1-63 of [a-z0-9-] starting
// with a letter or digit (app slugs and home targets).
func ValidSlug(s string) bool { return slugRE.MatchString(s) }

// Check checks a, with its defaults filled, calling bad once per bad field
// with the field's name relative to the app ("slug", "health.path").
// hasHome reports whether a home id exists. A duplicate slug is the
// caller's to check.
func (a App) Check(hasHome func(id string) bool, bad func(field, format string, args ...any)) {
	if !ValidSlug(a.Slug) {
		bad("slug", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", a.Slug)
	}
	a.checkTarget(hasHome, bad)
	if a.Kind != AppKindUI && a.Kind != AppKindAPI {
		bad("kind", "want ui or api, got %q", a.Kind)
	}
	switch a.Health.Type {
	case HealthHTTP, HealthTCP:
	default:
		bad("health.type", "want http or tcp, got %q", a.Health.Type)
	}
	if u, err := url.Parse(a.Health.Path); err != nil || !strings.HasPrefix(a.Health.Path, "/") || u.Host != "" {
		bad("health.path", "want an absolute path such as /healthz, got %q", a.Health.Path)
	}
	if err := web.CheckTheme(a.WaitingTheme); err != nil {
		bad("waiting_theme", "%v", err)
	}
	if a.DesiredState != AppRunning && a.DesiredState != AppStopped {
		bad("desired_state", "want running or stopped, got %q", a.DesiredState)
	}
	if a.FailureThreshold < 1 {
		bad("failure_threshold", "must be at least 1, got %d", a.FailureThreshold)
	}
	for _, d := range []struct {
		k string
		v Duration
	}{{"min_refresh", a.MinRefresh}, {"refresh_timeout", a.RefreshTimeout}, {"health.interval", a.Health.Interval},
		{"health.max_interval", a.Health.MaxInterval}, {"health.timeout", a.Health.Timeout}, {"health.start_period", a.Health.StartPeriod}} {
		if d.v < 0 {
			bad(d.k, "must not be negative, got %s", d.v)
		}
	}
}

// checkTarget checks where a goes: an upstream URL or a home, and a home
// app's path.
func (a App) checkTarget(hasHome func(id string) bool, bad func(field, format string, args ...any)) {
	switch {
	case a.Upstream == "" && a.Home == "":
		bad("upstream", "set upstream (a URL) or home (a home id)")
	case a.Upstream != "" && a.Home != "":
		bad("home", "set upstream or home, not both")
	case a.Upstream != "":
		u, err := url.Parse(a.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("upstream", "want an http or https URL, got %q", a.Upstream)
		}
	case !hasHome(a.Home):
		bad("home", "no home with id %q", a.Home)
	}
	if a.Path != "" {
		if a.Home == "" {
			bad("path", "only apps inside a home have a path; put it in the upstream URL")
		} else if u, err := url.Parse(a.Path); err != nil || !strings.HasPrefix(a.Path, "/") || u.RawQuery != "" || u.Host != "" {
			bad("path", "want an absolute path such as /app, got %q", a.Path)
		}
	}
}

// API reports whether a follows the API status rules (kind api).
func (a App) API() bool { return a.Kind == AppKindAPI }

// Stopped reports whether a's desired state is stopped.
func (a App) Stopped() bool { return a.DesiredState == AppStopped }

// AppCond returns the condition that matches a as it was read.
func AppCond(a App) Cond { return Cond{Generation: a.Generation, Owner: a.Owner} }
