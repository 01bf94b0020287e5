package registry_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// A stale read is not a silent overwrite: registry.UpdateHome reads the home again
// and reapplies only its own change on top of the other writer's.
func TestUpdateHomeReappliesOnConflict(t *testing.T) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stale, err := s.PutHome(ctx, registry.Home{ID: "h1", Target: "t1", Status: registry.StatusSleeping}, registry.Cond{})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer moves the home on.
	other := stale
	other.Endpoint = "http://127.0.0.1:1"
	if _, err := s.PutHome(ctx, other, registry.CondOf(stale)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := registry.UpdateHome(ctx, s, stale, "me", func(h *registry.Home) {
		calls++
		h.Status = registry.StatusRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("change applied %d times, want 2 (stale, then fresh)", calls)
	}
	if got.Status != registry.StatusRunning || got.Endpoint != "http://127.0.0.1:1" || got.Owner != "me" || got.Generation != 3 {
		t.Fatalf("stored %+v: want the other writer's endpoint kept, status running, owner me, generation 3", got)
	}
}

func TestUpdateHomeMissing(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = registry.UpdateHome(context.Background(), s, registry.Home{ID: "nope"}, "me", func(*registry.Home) {})
	if !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("err = %v, want registry.ErrNotFound", err)
	}
}
