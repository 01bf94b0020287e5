package docker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wakegate/wakegate/provider/group"
)

// A group home runs several containers, its members, as one home: one
// wake starts them all in the order their depends_on gives, one stop stops
// them in the reverse order, a roll replaces those whose image changed.
// The entry member is the home's own container (named and labelled as a
// home's container is, its port the home's port); every other member is a
// container named NAME-ID_MEMBER, labelled with the group's home id and
// its member name. All of them are on the home's own network, where each
// is reached by its member name.

// Labels on a group's members besides the entry.
const (
	// LabelGroup is the home id of the group a member belongs to.
	LabelGroup = "wakegate.group"
	// LabelMember is the member's name in its group.
	LabelMember = "wakegate.member"
)

// Member is one container of a group home (options.members).
type Member struct {
	// Name is the member's name in the group, and its host name on the
	// home's network: 1-63 of [a-z0-9-], starting and ending with a
	// letter or digit.
	Name string `json:"name"`
	// Image is the member's image template (placeholders as in image).
	Image string `json:"image"`
	// Env are the member's KEY=VALUE entries. The entry member's follow
	// the section's and the home's; the others have only their own.
	Env []string `json:"env,omitempty"`
	// Command replaces the image's CMD. Default: the entry member runs
	// the home's command as a single home does; the others their image's.
	Command []string `json:"command,omitempty"`
	// Volumes are the member's mounts, as the home's volumes option
	// reads them: "NAME:/path[:ro]" (a named volume, which outlives the
	// container, so a roll that makes the member again keeps its data) or
	// "/host/path:/path[:ro]". The entry's follow the home's.
	Volumes []string `json:"volumes,omitempty"`
	// DependsOn names the members that must be ready before this one
	// starts.
	DependsOn []string `json:"depends_on,omitempty"`
	// Entry marks the member the gateway forwards to; exactly one has it.
	Entry bool `json:"entry,omitempty"`
	// Container names the existing container the member is, in a group of
	// existing containers (the home's options.container is the entry's):
	// the gateway starts and stops it in the group's order and never makes
	// it, so image, env, command and volumes are the container's own.
	Container string `json:"container,omitempty"`
}

// node is what package group reads of a member.
func (m Member) node() group.Node {
	return group.Node{Name: m.Name, DependsOn: m.DependsOn, Entry: m.Entry}
}

// checkMembers checks, into ps, a home's members: names, depends_on
// naming members, no cycle, exactly one entry (package group), and
// images, environments and commands.
func checkMembers(ps map[string]string, o *HomeOptions) {
	if len(o.Members) == 0 {
		return
	}
	if o.Image != "" {
		ps["image"] = "a group's images are its members': set members[].image instead"
	}
	if len(o.Command) > 0 {
		ps["command"] = "a group's commands are its members': set members[].command instead"
	}
	for i, m := range o.Members {
		f := fmt.Sprintf("members[%d].", i)
		switch {
		case o.Container != "":
			checkExistingMember(ps, f, o.Container, m)
		case m.Container != "":
			ps[f+"container"] = "only a group of existing containers (options.container) names its members' containers"
		case strings.TrimSpace(m.Image) == "":
			ps[f+"image"] = "required: the image the member runs"
		}
		sub := map[string]string{}
		checkProcess(sub, m.Env, m.Command, 0, nil, "")
		for j, v := range m.Volumes {
			if err := checkVolume(v); err != nil {
				sub[fmt.Sprintf("volumes[%d]", j)] = err.Error()
			}
		}
		for k, v := range sub {
			ps[f+k] = v
		}
	}
	maps.Copy(ps, group.Check(o.Members, Member.node))
}

// startOrder is ms in start order, or the cycle depends_on makes
// (group.Order).
func startOrder(ms []Member) ([]Member, []string) { return group.Order(ms, Member.node) }

// entryMember is the group's entry, or nil for a single home.
func (o *HomeOptions) entryMember() *Member {
	for i := range o.Members {
		if o.Members[i].Entry {
			return &o.Members[i]
		}
	}
	return nil
}

// asEntry makes the options of a group home those of its entry container:
// the entry member's image and command, its env and volumes after the
// home's. A home
// without members is left as it is.
func (o *HomeOptions) asEntry() {
	if e := o.entryMember(); e != nil {
		o.Image = e.Image
		o.Command = e.Command
		o.Env = append(slices.Clone(o.Env), e.Env...)
		o.Volumes = append(slices.Clone(o.Volumes), e.Volumes...)
	}
}
