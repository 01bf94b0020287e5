package control

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/wakegate/wakegate/homes"
)

// tableRoute is a table entry as the gateway's is: a pointer to the spec.
type tableRoute struct{ spec homes.Spec }

func (r *tableRoute) Spec() homes.Spec { return r.spec }

func tableHome(id, target string) *tableRoute {
	return &tableRoute{spec: homes.Spec{ID: id, Target: target}}
}

// TestHomeTableChanges walks the table's changes: add, move to another
// target, replace in place, remove, and a removal that must not take the
// route of a target another home holds now.
func TestHomeTableChanges(t *testing.T) {
	var g HomeTable[*tableRoute]
	g.Set("a", tableHome("a", "alice"))
	g.Set("b", tableHome("b", "bob"))
	g.Set("a", tableHome("a", "anna")) // moved
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
		if h, ok := g.At(s.target); ok {
			got = h.spec.ID
		}
		if got != s.want {
			t.Errorf("%s: %s routes %q, want %q", s.name, s.target, got, s.want)
		}
	}
	// Another home takes bob's target (a config home wins it), then b is
	// removed: the target stays the new holder's.
	g.Set("c", tableHome("c", "bob"))
	g.Drop("b")
	if h, ok := g.At("bob"); !ok || h.spec.ID != "c" {
		t.Errorf("removing b took the route of c's target")
	}
	if _, ok := g.WithID("b"); ok {
		t.Error("a removed home is still found by id")
	}
	if n := g.Count(); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	seen := 0
	g.Each(func(*tableRoute) bool { seen++; return true })
	if seen != 2 {
		t.Errorf("Each saw %d homes, want 2", seen)
	}
}

// TestHomeTableChangeCostIsFlat proves that adding a home to a table of
// 20,000 costs what adding one to a table of 10 does: it measures the
// bytes allocated (no timing). A table copied on every change allocates
// at least one map entry per home already there.
func TestHomeTableChangeCostIsFlat(t *testing.T) {
	per := func(existing int) float64 {
		var g HomeTable[*tableRoute]
		for i := range existing {
			id := fmt.Sprintf("h%06d", i)
			g.Set(id, tableHome(id, id))
		}
		const adds = 200
		homes := make([]*tableRoute, adds)
		for i := range homes {
			id := fmt.Sprintf("n%06d", i)
			homes[i] = tableHome(id, id)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, h := range homes {
			g.Set(h.spec.ID, h)
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
