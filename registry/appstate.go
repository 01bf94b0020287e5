package registry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AppState is an operator's desired state of an app (`app stop`, `app
// start`), kept apart from the app's own record so that it holds for apps
// of the config as well as for those registered at runtime, across
// restarts and on every gateway sharing the store. No record means the
// app's declared desired state.
type AppState struct {
	Slug string `json:"slug"`
	// DesiredState is AppRunning or AppStopped.
	DesiredState string    `json:"desired_state"`
	UpdatedAt    time.Time `json:"updated_at,omitzero"`
	// Generation counts writes; 0 means the record has never been stored.
	Generation uint64 `json:"generation"`
	// Owner is the token of the last writer (a gateway instance).
	Owner string `json:"owner,omitempty"`
}

// Stopped reports whether s asks for the app to be stopped.
func (s AppState) Stopped() bool { return s.DesiredState == AppStopped }

// AppStateCond returns the condition that matches s as it was read.
func AppStateCond(s AppState) Cond { return Cond{Generation: s.Generation, Owner: s.Owner} }

func (s AppState) stamp() (uint64, string) { return s.Generation, s.Owner }

// AppStateKey is the change key of app slug's desired state. A change of
// it is also announced on AnyAppKey.
func AppStateKey(slug string) string { return changeAppState + slug }

// bucketAppStates holds the operators' desired states: slug -> JSON AppState.
var bucketAppStates = []byte("appstates")

// validateAppState refuses a record no reader could use.
func validateAppState(s AppState) error {
	switch {
	case s.Slug == "":
		return errors.New("slug is empty")
	case s.DesiredState != AppRunning && s.DesiredState != AppStopped:
		return errors.New("desired state must be running or stopped, got " + s.DesiredState)
	}
	return nil
}

// GetAppState returns the desired state stored for slug.
func (b *Bolt) GetAppState(ctx context.Context, slug string) (AppState, error) {
	return boltGet[AppState](ctx, b, bucketAppStates, "appstate", slug)
}

// ListAppStates returns every stored desired state, ordered by slug.
func (b *Bolt) ListAppStates(ctx context.Context) ([]AppState, error) {
	return boltList[AppState](ctx, b, bucketAppStates, "appstates")
}

// PutAppState writes s if the stored record matches cond.
func (b *Bolt) PutAppState(ctx context.Context, s AppState, cond Cond) (AppState, error) {
	if err := validateAppState(s); err != nil {
		return AppState{}, fmt.Errorf("registry: put app state %s: %w", s.Slug, err)
	}
	return boltPut(ctx, b, bucketAppStates, "appstate", s.Slug, cond, s, func(s *AppState, gen uint64) { s.Generation = gen })
}

// GetAppState returns the desired state stored for slug.
func (r *Redis) GetAppState(ctx context.Context, slug string) (AppState, error) {
	return redisGet[AppState](ctx, r, r.keys.appStates, "appstate", slug)
}

// ListAppStates returns every stored desired state, ordered by slug.
func (r *Redis) ListAppStates(ctx context.Context) ([]AppState, error) {
	return redisList[AppState](ctx, r, r.keys.appStates, "appstates")
}

// PutAppState writes s if the stored record matches cond (see Store).
func (r *Redis) PutAppState(ctx context.Context, s AppState, cond Cond) (AppState, error) {
	if err := validateAppState(s); err != nil {
		return AppState{}, fmt.Errorf("registry: put app state %s: %w", s.Slug, err)
	}
	return redisPut(ctx, r, r.keys.appStates, "appstate", s.Slug, cond, s, func(s *AppState, gen uint64) { s.Generation = gen })
}
