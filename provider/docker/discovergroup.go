package docker

import (
	"github.com/wakegate/wakegate/provider/group"

	"fmt"
	"maps"
	"slices"
	"strings"
)

// A group found by its labels: every container labelled
// wakegate.enable=true with the same wakegate.group=ID is a member of home
// ID, one of them wakegate.entry=true. A member's name is its
// wakegate.member label, else its compose service, else its container's
// name; it starts after the members its wakegate.depends_on names (else
// those of its compose service's depends_on that are members). The home is
// a group of existing containers (existing.go): started in that order,
// stopped in the reverse one, never made or removed.

// memberLabels reads the member that container name is in its group.
func memberLabels(name string, l map[string]string) (Member, error) {
	bad := func(label, format string, a ...any) (Member, error) {
		return Member{}, fmt.Errorf("container %s: label %s: %s", name, label, fmt.Sprintf(format, a...))
	}
	m := Member{Name: name, Container: name}
	if v, ok := l[composeService]; ok {
		m.Name = v
	}
	if v, ok := l[LabelMember]; ok {
		m.Name = v
	}
	if !group.NameRE.MatchString(m.Name) {
		return bad(LabelMember, "the member's name %q (its label, compose service or container name) is not 1-63 of [a-z0-9-] "+
			"starting and ending with a letter or digit: set one", m.Name)
	}
	switch v := l[LabelEntry]; v {
	case "true":
		m.Entry = true
	case "", "false":
	default:
		return bad(LabelEntry, "want true or false, got %q", v)
	}
	if v, ok := l[LabelDependsOn]; ok {
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				m.DependsOn = append(m.DependsOn, d)
			}
		}
	}
	return m, nil
}

// composeDeps are the services the compose label of a container names:
// "db:service_healthy:false,cache:service_started:true" (compose v2), or
// bare names.
func composeDeps(l map[string]string) []string {
	var out []string
	for _, d := range strings.Split(l[composeDependsOn], ",") {
		if s, _, _ := strings.Cut(strings.TrimSpace(d), ":"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// joinGroup makes one home of group id's containers (fs, each a Found of
// one member as parseLabels read it). An error names the group, and the
// container and label at fault.
func joinGroup(id string, fs []Found) (Found, error) {
	slices.SortFunc(fs, func(a, b Found) int { return strings.Compare(a.Container, b.Container) })
	var entries, names []string
	var home Found
	index := map[string]string{} // member name -> container
	for _, f := range fs {
		m := f.Members[0]
		names = append(names, m.Container)
		if other, dup := index[m.Name]; dup {
			return Found{}, fmt.Errorf("group %s: container %s: label %s: member %s is container %s already",
				id, m.Container, LabelMember, m.Name, other)
		}
		index[m.Name] = m.Container
		if m.Entry {
			entries = append(entries, m.Container)
			home = f
		}
	}
	if len(entries) != 1 {
		return Found{}, fmt.Errorf("group %s: label %s: want it true on exactly one of its containers (%s), got %d",
			id, LabelEntry, strings.Join(names, ", "), len(entries))
	}
	home.Members, home.composeDeps = nil, nil
	for _, f := range fs {
		m := f.Members[0]
		if m.DependsOn == nil {
			for _, d := range f.composeDeps {
				if _, ok := index[d]; ok { // a service outside the group is not the gateway's to start
					m.DependsOn = append(m.DependsOn, d)
				}
			}
		}
		for _, d := range m.DependsOn {
			if _, ok := index[d]; !ok {
				return Found{}, fmt.Errorf("group %s: container %s: label %s: no member is named %q (members: %s)",
					id, m.Container, LabelDependsOn, d, strings.Join(slices.Sorted(maps.Keys(index)), ", "))
			}
		}
		home.Members = append(home.Members, m)
	}
	if _, cycle := startOrder(home.Members); cycle != nil {
		return Found{}, fmt.Errorf("group %s: label %s: the members' order makes a cycle: %s",
			id, LabelDependsOn, strings.Join(cycle, " -> "))
	}
	return home, nil
}

// addFound adds f to found, unless another container (or group) holds its
// id, which label set.
func addFound(found map[string]Found, f Found, label string) (map[string]Found, error) {
	if other, dup := found[f.ID]; dup {
		return found, fmt.Errorf("container %s: label %s: home %s is container %s's already", f.Container, label, f.ID, other.Container)
	}
	found[f.ID] = f
	return found, nil
}
