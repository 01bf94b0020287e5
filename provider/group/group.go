// Package group holds what every provider's groups share: a home that
// runs several members (containers of provider/docker, processes of
// provider/exec) as one home, with start dependencies (depends_on) and
// exactly one entry member the gateway forwards to. It orders the members
// for a start (each after the members it depends on; a stop runs the
// order backwards), checks the parts of a member list every provider
// reads the same way (names, depends_on, the entry and cycles) and sums
// the members' states up in the group's status.
//
// DESIGN rules that live here: the config half of 30 (a group that cannot
// be started in one order is refused at load, by field).
package group

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/wakegate/wakegate/provider"
)

// Node is what the group code reads of one member.
type Node struct {
	// Name is the member's name in its group.
	Name string
	// DependsOn names the members that must be ready before it starts.
	DependsOn []string
	// Entry marks the member the gateway forwards to.
	Entry bool
}

// NameRE is what a member's name must be: 1-63 of [a-z0-9-], starting and
// ending with a letter or digit (a host name's label).
var NameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Check returns the problems of a member list by field, relative to the
// list's parent ("members", "members[1].name", "members[2].depends_on[0]",
// "members[1].entry"): a bad or repeated name, a depends_on naming no
// member, no entry or more than one, and a cycle.
func Check[M any](ms []M, node func(M) Node) map[string]string {
	ps := map[string]string{}
	index := map[string]int{}
	var entries []int
	for i, m := range ms {
		n := node(m)
		f := fmt.Sprintf("members[%d].name", i)
		if j, dup := index[n.Name]; dup {
			ps[f] = fmt.Sprintf("%q is the name of members[%d] already: names are unique", n.Name, j)
		} else if !NameRE.MatchString(n.Name) {
			ps[f] = fmt.Sprintf("want 1-63 of [a-z0-9-] starting and ending with a letter or digit, got %q", n.Name)
		} else {
			index[n.Name] = i
		}
		if n.Entry {
			entries = append(entries, i)
		}
	}
	depsKnown := true
	for i, m := range ms {
		for j, d := range node(m).DependsOn {
			if _, ok := index[d]; !ok {
				ps[fmt.Sprintf("members[%d].depends_on[%d]", i, j)] = fmt.Sprintf("no member is named %q", d)
				depsKnown = false
			}
		}
	}
	switch len(entries) {
	case 0:
		ps["members"] = "no member is the entry: mark the one the gateway forwards to with entry: true"
	case 1:
	default:
		ps[fmt.Sprintf("members[%d].entry", entries[1])] = fmt.Sprintf("members[%d] is the entry already: a group has exactly one", entries[0])
	}
	if depsKnown {
		if _, cycle := Order(ms, node); cycle != nil {
			ps["members"] = "depends_on makes a cycle: " + strings.Join(cycle, " -> ")
		}
	}
	return ps
}

// Order is ms in an order where each member comes after the members it
// depends on (otherwise in the order declared), or, when depends_on makes
// a cycle, the names along it (the first name last again). A depends_on
// naming no member is passed over (Check refuses it).
func Order[M any](ms []M, node func(M) Node) ([]M, []string) {
	nodes := make([]Node, len(ms))
	index := map[string]int{}
	for i, m := range ms {
		nodes[i] = node(m)
		index[nodes[i].Name] = i
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(ms))
	var (
		out   []M
		path  []string
		visit func(i int) []string
	)
	visit = func(i int) []string {
		switch state[i] {
		case done:
			return nil
		case onPath:
			k := slices.Index(path, nodes[i].Name)
			return append(slices.Clone(path[k:]), nodes[i].Name)
		}
		state[i] = onPath
		path = append(path, nodes[i].Name)
		for _, d := range nodes[i].DependsOn {
			if j, ok := index[d]; ok {
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		out = append(out, ms[i])
		return nil
	}
	for i := range ms {
		if c := visit(i); c != nil {
			return nil, c
		}
	}
	return out, nil
}

// DependedOn are the names of the members some other member waits for.
func DependedOn[M any](ms []M, node func(M) Node) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for _, d := range node(m).DependsOn {
			out[d] = true
		}
	}
	return out
}

// Status is a group's status from its entry's (entry), each member's
// state ("db running", in start order) and the members other than the
// entry that are down: the entry's, with the members' states in its
// reason; failed, naming them, when members are down while the entry
// runs (the next wake starts the group again).
func Status(entry provider.Result, states, down []string) provider.Result {
	detail := "members: " + strings.Join(states, ", ")
	if entry.State == provider.StateRunning && len(down) > 0 {
		return provider.Result{State: provider.StateFailed, Ref: entry.Ref,
			Reason: fmt.Sprintf("member %s is not running; %s", strings.Join(down, ", "), detail)}
	}
	if entry.Reason != "" {
		detail = entry.Reason + "; " + detail
	}
	entry.Reason = detail
	return entry
}
