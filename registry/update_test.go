package registry

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// A stale read is not a silent overwrite: UpdateHome reads the home again
// and reapplies only its own change on top of the other writer's.
func TestUpdateHomeReappliesOnConflict(t *testing.T) {
	ctx := context.Background()
	s, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stale, err := s.PutHome(ctx, Home{ID: "h1", Target: "t1", Status: StatusSleeping}, Cond{})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer moves the home on.
	other := stale
	other.Endpoint = "http://127.0.0.1:1"
	if _, err := s.PutHome(ctx, other, CondOf(stale)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := UpdateHome(ctx, s, stale, "me", func(h *Home) {
		calls++
		h.Status = StatusRunning
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("change applied %d times, want 2 (stale, then fresh)", calls)
	}
	if got.Status != StatusRunning || got.Endpoint != "http://127.0.0.1:1" || got.Owner != "me" || got.Generation != 3 {
		t.Fatalf("stored %+v: want the other writer's endpoint kept, status running, owner me, generation 3", got)
	}
}

func TestUpdateHomeMissing(t *testing.T) {
	s, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"), BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = UpdateHome(context.Background(), s, Home{ID: "nope"}, "me", func(*Home) {})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}
