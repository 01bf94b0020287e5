package gateway

import (
	"net/url"
	"strings"
	"time"
)

// The defaults and checks of one app, shared by the config file (Load) and
// the admin API (PUT /admin/apps/{slug}), so that an app is held to the
// same rules wherever it is declared.

// rtAppDefaults fills a's unset fields with their defaults (see AppConfig).
func rtAppDefaults(a *AppConfig) {
	defaultStr(&a.Kind, "ui")
	defaultStr(&a.DesiredState, "running")
	defaultInt(&a.FailureThreshold, 3)
	defaultDur(&a.MinRefresh, time.Second)
	defaultDur(&a.RefreshTimeout, 30*time.Second)
	defaultStr(&a.Health.Type, "http")
	defaultStr(&a.Health.Path, "/")
	defaultDur(&a.Health.Interval, 2*time.Second)
	defaultDur(&a.Health.Timeout, 2*time.Second)
}

// rtCheckApp checks one app with its defaults filled, calling bad once per
// bad field with the field's name relative to the app ("slug",
// "health.path"). hasHome reports whether a home id exists. A duplicate
// slug is the caller's to check.
func rtCheckApp(a AppConfig, hasHome func(id string) bool, bad func(field, format string, args ...any)) {
	if !slugRE.MatchString(a.Slug) {
		bad("slug", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", a.Slug)
	}
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
	if a.Kind != "ui" && a.Kind != "api" {
		bad("kind", "want ui or api, got %q", a.Kind)
	}
	if a.Path != "" {
		if a.Home == "" {
			bad("path", "only apps inside a home have a path; put it in the upstream URL")
		} else if u, err := url.Parse(a.Path); err != nil || !strings.HasPrefix(a.Path, "/") || u.RawQuery != "" || u.Host != "" {
			bad("path", "want an absolute path such as /app, got %q", a.Path)
		}
	}
	switch a.Health.Type {
	case "http", "tcp":
	default:
		bad("health.type", "want http or tcp, got %q", a.Health.Type)
	}
	if u, err := url.Parse(a.Health.Path); err != nil || !strings.HasPrefix(a.Health.Path, "/") || u.Host != "" {
		bad("health.path", "want an absolute path such as /healthz, got %q", a.Health.Path)
	}
	if a.DesiredState != "running" && a.DesiredState != "stopped" {
		bad("desired_state", "want running or stopped, got %q", a.DesiredState)
	}
	if a.FailureThreshold < 1 {
		bad("failure_threshold", "must be at least 1, got %d", a.FailureThreshold)
	}
	for _, d := range []struct {
		k string
		v time.Duration
	}{{"min_refresh", a.MinRefresh}, {"refresh_timeout", a.RefreshTimeout}, {"health.interval", a.Health.Interval},
		{"health.timeout", a.Health.Timeout}, {"health.start_period", a.Health.StartPeriod}} {
		if d.v < 0 {
			bad(d.k, "must not be negative, got %s", d.v)
		}
	}
}
