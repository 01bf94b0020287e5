package registry

import (
	"context"
	"errors"
	"time"
)

// bucketApps holds the apps registered at runtime: slug -> JSON App.
var bucketApps = []byte("apps")

// App is the stored record of an app registered through the admin API, with
// every field its registration needs. Durations are stored resolved (the
// gateway's defaults already applied), so an app is registered again at
// start exactly as it was.
type App struct {
	// Slug is the name in /apps/{slug}. Required.
	Slug string `json:"slug"`
	// Upstream is a URL app's base URL; Home the id of the home a home
	// app runs in. Exactly one is set.
	Upstream string `json:"upstream,omitempty"`
	Home     string `json:"home,omitempty"`
	// Kind is "ui" or "api".
	Kind string `json:"kind"`
	// StripPrefix removes /apps/{slug} before forwarding.
	StripPrefix bool `json:"strip_prefix,omitempty"`
	// Path is a home app's base path on the home's endpoint.
	Path string `json:"path,omitempty"`
	// Health is the direct health check.
	Health AppHealth `json:"health"`
	// DesiredState is "running" or "stopped".
	DesiredState string `json:"desired_state"`
	// FailureThreshold, MinRefresh and RefreshTimeout are the observation
	// settings of the app.
	FailureThreshold int           `json:"failure_threshold"`
	MinRefresh       time.Duration `json:"min_refresh"`
	RefreshTimeout   time.Duration `json:"refresh_timeout"`
	// UpdatedAt is when the app was last registered or replaced.
	UpdatedAt time.Time `json:"updated_at"`

	// Generation counts writes; 0 means the record has never been stored.
	Generation uint64 `json:"generation"`
	// Owner is the token of the last writer (a gateway instance).
	Owner string `json:"owner,omitempty"`
}

// AppHealth is the stored health check of an app.
type AppHealth struct {
	// Type is "http" or "tcp".
	Type string `json:"type"`
	// Path is the http check's path.
	Path string `json:"path"`
	// Interval, Timeout and StartPeriod are those of the app's config.
	Interval    time.Duration `json:"interval"`
	Timeout     time.Duration `json:"timeout"`
	StartPeriod time.Duration `json:"start_period,omitempty"`
}

// AppCond returns the condition that matches a as it was read.
func AppCond(a App) Cond { return Cond{Generation: a.Generation, Owner: a.Owner} }

// GetApp returns one stored app by slug.
func (b *Bolt) GetApp(ctx context.Context, slug string) (App, error) {
	return boltGet[App](ctx, b, bucketApps, "app", slug)
}

// ListApps returns every stored app, ordered by slug.
func (b *Bolt) ListApps(ctx context.Context) ([]App, error) {
	return boltList[App](ctx, b, bucketApps, "apps")
}

// PutApp writes a if the stored record matches cond. The record written and
// returned has Generation cond.Generation+1 and Owner a.Owner. An app needs
// a non-empty Slug.
func (b *Bolt) PutApp(ctx context.Context, a App, cond Cond) (App, error) {
	if a.Slug == "" {
		return App{}, errors.New("registry: put app: slug is empty")
	}
	return boltPut(ctx, b, bucketApps, "app", a.Slug, cond, a, func(a *App, gen uint64) { a.Generation = gen })
}

// DeleteApp removes an app if the stored record matches cond; ErrNotFound
// when there is none. A cond with Generation 0 never matches a stored app.
func (b *Bolt) DeleteApp(ctx context.Context, slug string, cond Cond) error {
	return boltDelete[App](ctx, b, bucketApps, "app", slug, cond)
}
