package registry

import (
	"errors"
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

// Stamp returns s's generation and owner token.
func (s AppState) Stamp() (uint64, string) { return s.Generation, s.Owner }

// AppStateKey is the change key of app slug's desired state. A change of
// it is also announced on AnyAppKey.
func AppStateKey(slug string) string { return changeAppState + slug }

// Validate refuses a record no reader could use.
func (s AppState) Validate() error {
	switch {
	case s.Slug == "":
		return errors.New("slug is empty")
	case s.DesiredState != AppRunning && s.DesiredState != AppStopped:
		return errors.New("desired state must be running or stopped, got " + s.DesiredState)
	}
	return nil
}
