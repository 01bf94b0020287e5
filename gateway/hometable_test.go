package gateway

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/wakegate/wakegate/wake"
)

func tableHome(id, target string) *homeRoute {
	return &homeRoute{spec: wake.HomeSpec{ID: id, Target: target}}
}

// TestHomeTableChanges walks the table's changes: add, move to another
// target, replace in place, remove, and a removal that must not take the
// route of a target another home holds now.
func TestHomeTableChanges(t *testing.T) {
	g := &Gateway{}
	g.setHome("a", tableHome("a", "alice"))
	g.setHome("b", tableHome("b", "bob"))
	g.setHome("a", tableHome("a", "anna")) // moved
	steps := []struct {
		name   string
		target string
		want   string // the id routed there, "" for none
	}{
		{"a moved home's old target", "alice", ""},
		{"a moved home's new target", "anna", "a"},
		{"an untouched home", "bob", "b"},
	}
	for _, s := range steps {
		got := ""
		if h, ok := g.homeAt(s.target); ok {
			got = h.spec.ID
		}
		if got != s.want {
			t.Errorf("%s: %s routes %q, want %q", s.name, s.target, got, s.want)
		}
	}
	// Another home takes bob's target (a config home wins it), then b is
	// removed: the target stays the new holder's.
	g.setHome("c", tableHome("c", "bob"))
	g.setHome("b", nil)
	if h, ok := g.homeAt("bob"); !ok || h.spec.ID != "c" {
		t.Errorf("removing b took the route of c's target")
	}
	if _, ok := g.homeWithID("b"); ok {
		t.Error("a removed home is still found by id")
	}
	if n := g.homeCount(); n != 2 {
		t.Errorf("homeCount = %d, want 2", n)
	}
	seen := 0
	g.eachHome(func(*homeRoute) bool { seen++; return true })
	if seen != 2 {
		t.Errorf("eachHome saw %d homes, want 2", seen)
	}
}

// TestHomeTableChangeCostIsFlat proves that adding a home to a table of
// 20,000 costs what adding one to a table of 10 does: it measures the
// bytes allocated (no timing). A table copied on every change allocates
// at least one map entry per home already there.
func TestHomeTableChangeCostIsFlat(t *testing.T) {
	per := func(existing int) float64 {
		g := &Gateway{}
		for i := range existing {
			id := fmt.Sprintf("h%06d", i)
			g.setHome(id, tableHome(id, id))
		}
		const adds = 200
		homes := make([]*homeRoute, adds)
		for i := range homes {
			id := fmt.Sprintf("n%06d", i)
			homes[i] = tableHome(id, id)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, h := range homes {
			g.setHome(h.spec.ID, h)
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / adds
	}
	small, large := per(10), per(20000)
	// A copy of 20,000 entries is hundreds of KiB a change; a flat table
	// allocates the same few hundred bytes at both sizes.
	if large > 4*small+1024 {
		t.Fatalf("adding a home allocates %.0f bytes with 20,000 homes and %.0f with 10: the cost grows with the table", large, small)
	}
}
