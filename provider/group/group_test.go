package group_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/group"
)

func id(n group.Node) group.Node { return n }

// TestOrder: each member after those it depends on, the declared order
// otherwise; a cycle is named along its path.
func TestOrder(t *testing.T) {
	ms := []group.Node{
		{Name: "app", DependsOn: []string{"db", "cache"}, Entry: true},
		{Name: "worker", DependsOn: []string{"app"}},
		{Name: "db"},
		{Name: "cache", DependsOn: []string{"db"}},
	}
	out, cycle := group.Order(ms, id)
	var names []string
	for _, m := range out {
		names = append(names, m.Name)
	}
	if cycle != nil || !slices.Equal(names, []string{"db", "cache", "app", "worker"}) {
		t.Fatalf("order %v (cycle %v), want db cache app worker", names, cycle)
	}
	ms[2].DependsOn = []string{"worker"}
	if _, cycle := group.Order(ms, id); strings.Join(cycle, " ") != "app db worker app" {
		t.Fatalf("cycle %v, want app db worker app", cycle)
	}
}

// TestCheck: each problem under its field.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ms    []group.Node
		field string
		msg   string
	}{
		{"unknown depends_on", []group.Node{{Name: "app", Entry: true, DependsOn: []string{"db"}}}, "members[0].depends_on[0]", `no member is named "db"`},
		{"no entry", []group.Node{{Name: "app"}}, "members", "no member is the entry"},
		{"two entries", []group.Node{{Name: "a", Entry: true}, {Name: "b", Entry: true}}, "members[1].entry", "members[0] is the entry already"},
		{"duplicate", []group.Node{{Name: "a", Entry: true}, {Name: "a"}}, "members[1].name", "members[0] already"},
		{"bad name", []group.Node{{Name: "A_1", Entry: true}}, "members[0].name", "[a-z0-9-]"},
		{"cycle", []group.Node{{Name: "a", Entry: true, DependsOn: []string{"b"}}, {Name: "b", DependsOn: []string{"a"}}}, "members", "cycle: a -> b -> a"},
	} {
		ps := group.Check(tc.ms, id)
		if !strings.Contains(ps[tc.field], tc.msg) {
			t.Errorf("%s: problems %v, want %s: …%s…", tc.name, ps, tc.field, tc.msg)
		}
	}
	if ps := group.Check([]group.Node{{Name: "db"}, {Name: "app", Entry: true, DependsOn: []string{"db"}}}, id); len(ps) != 0 {
		t.Fatalf("a valid group: %v", ps)
	}
}
