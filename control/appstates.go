package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// An operator's stop or start of an app (`wakegate app stop`) is stored
// as the app's desired state (registry.AppState), for apps of the config
// and of the admin API alike: a restarted gateway keeps a stopped app
// stopped, and every gateway of a fleet applies it (Fleet). The
// route table keeps the stored states, so that an app installed again (a
// reload, a replacement) keeps the operator's word over its declared
// desired_state.

// appStates is the route table's copy of the stored desired states.
type appStates struct {
	mu      sync.Mutex
	stopped map[string]bool // slug -> stopped; absent: the declared state
}

// get returns slug's stored desired state, if any.
func (s *appStates) get(slug string) (stopped, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopped, ok = s.stopped[slug]
	return stopped, ok
}

// set records slug's stored desired state and reports whether it changed.
func (s *appStates) set(slug string, stopped bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = map[string]bool{}
	}
	prev, ok := s.stopped[slug]
	s.stopped[slug] = stopped
	return !ok || prev != stopped
}

// LoadStates reads the stored desired states into the table, before any
// app is installed (the gateway's New).
func (t *AppTable[A]) LoadStates(ctx context.Context) error {
	recs, err := t.store.ListAppStates(ctx)
	if err != nil {
		return fmt.Errorf("read the apps' desired states: %w", err)
	}
	for _, rec := range recs {
		t.states.set(rec.Slug, rec.Stopped())
	}
	return nil
}

// storeState writes slug's desired state (appstatus.Options.Desired).
// A concurrent writer's record is read again and overwritten: the last
// operator's word wins.
func (t *AppTable[A]) storeState(ctx context.Context, slug string, stopped bool) error {
	want := registry.AppRunning
	if stopped {
		want = registry.AppStopped
	}
	for range 3 {
		cur, err := t.store.GetAppState(ctx, slug)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			cur = registry.AppState{}
		case err != nil:
			return fmt.Errorf("read: %w", err)
		}
		if cur.Generation != 0 && cur.DesiredState == want {
			t.states.set(slug, stopped)
			return nil
		}
		rec := registry.AppState{Slug: slug, DesiredState: want, UpdatedAt: time.Now().UTC(), Owner: t.instance}
		_, err = t.store.PutAppState(ctx, rec, registry.AppStateCond(cur))
		if errors.Is(err, registry.ErrConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		t.states.set(slug, stopped)
		return nil
	}
	return fmt.Errorf("write: other writers kept changing it: %w", registry.ErrConflict)
}
