// Package members runs a group of processes of the exec provider as one
// home: its members' options and their checks, then one lifecycle over
// them (run.go): the start in depends_on order, each member once the
// members it depends on pass their probe, the stop and suspend in the
// reverse order, the roll that makes again only what changed, and the
// group's status. What a member is as a process (its folder, log, record,
// containment, user and limits) is the exec provider's, reached through
// the Runner interface. The order and the checks every provider's groups
// share are package provider/group's.
//
// The entry member is the home's own process (its id, folder, log,
// record, relay token and port are the home's). Every other member is
// kept by the provider as a home of its own named <home>@<member>. A
// member is never restarted on its own: one that exits makes the group
// whole no more, and the next wake starts the group again.
//
// DESIGN rules that live here: 29 for a group (a group's stop is proven
// when every member's is), the group half of 5 (a member that fails makes
// the wake fail with its name in the operator's hint, and what the wake
// started is stopped).
package members

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/group"
)

// Member is one process of a group home (options.members).
type Member struct {
	// Name is the member's name in the group: 1-63 of [a-z0-9-], starting
	// and ending with a letter or digit.
	Name string `json:"name"`
	// Command is the member's command template, with the placeholders of
	// the exec section's command ({port} is the member's own port,
	// {data_dir} its own folder). Required, but for the entry, which runs
	// the exec section's command when it has none.
	Command []string `json:"command,omitempty"`
	// Env are the member's KEY=VALUE entries, after the section's env.
	// The entry's follow the home's env; the others have only their own.
	Env []string `json:"env,omitempty"`
	// WorkingDir is the member's working directory, an absolute path.
	// Default: its folder (the entry: the home's working_dir, else the
	// home's folder).
	WorkingDir string `json:"working_dir,omitempty"`
	// Probe says when the member is ready: "tcp" (its port accepts a
	// connection), or an HTTP path ("/health") that answers 2xx or 3xx on
	// its port. Default (empty): ready once it runs.
	Probe string `json:"probe,omitempty"`
	// DependsOn names the members that must pass their probe before this
	// one starts. Each one's address is given to it in AddrVar(name).
	DependsOn []string `json:"depends_on,omitempty"`
	// Entry marks the member the gateway forwards to; exactly one has it.
	Entry bool `json:"entry,omitempty"`
}

// ProbeTCP is the Probe of a member that is ready once its port accepts a
// connection.
const ProbeTCP = "tcp"

// node is what package group reads of a member.
func (m Member) node() group.Node {
	return group.Node{Name: m.Name, DependsOn: m.DependsOn, Entry: m.Entry}
}

// AddrVar is the variable that gives a member the address
// (127.0.0.1:PORT) of member name, which it depends on:
// WAKEGATE_MEMBER_<NAME>_ADDR, the name upper-cased with - as _.
func AddrVar(name string) string {
	return "WAKEGATE_MEMBER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_ADDR"
}

// ID is the provider's id of member name of home id: no home id holds an
// @ (config refuses it), so no member's id is a home's.
func ID(id, name string) string { return id + "@" + name }

// Of is the members of a home's options in start order; nil for a home
// of one process, or options a load refuses (a cycle, unreadable).
func Of(opts json.RawMessage) []Member {
	var o struct {
		Members []Member `json:"members"`
	}
	if json.Unmarshal(opts, &o) != nil || len(o.Members) == 0 {
		return nil
	}
	ms, cycle := group.Order(o.Members, Member.node)
	if cycle != nil {
		return nil
	}
	return ms
}

// Made is a digest of what a member runs: its command (with the version,
// when the command names it), environment and working directory. A roll
// restarts a member whose digest changed.
func Made(command, env []string, dir, version string) string {
	h := sha256.New()
	for _, a := range command {
		fmt.Fprintf(h, "c%q", strings.ReplaceAll(a, "{version}", version))
	}
	for _, kv := range env {
		fmt.Fprintf(h, "e%q", kv)
	}
	fmt.Fprintf(h, "d%q", dir)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Check returns the problems of a group home's members, by field: those
// package group finds (names, depends_on, the entry, cycles), a home
// command beside the members', and each member's command (usesSocket
// tells a command that names {socket}), env, working_dir and probe.
func Check(homeCommand []string, ms []Member, usesSocket func([]string) bool) []provider.Problem {
	if len(ms) == 0 {
		return nil
	}
	ps := group.Check(ms, Member.node)
	for i, m := range ms {
		f := fmt.Sprintf("members[%d].", i)
		switch {
		case len(m.Command) == 0 && !m.Entry:
			ps[f+"command"] = "required: the command the member runs ({port} is its port)"
		case len(m.Command) > 0 && m.Command[0] == "":
			ps[f+"command"] = "the program (command[0]) is empty"
		case usesSocket(m.Command):
			ps[f+"command"] = "a member listens on {port}: members reach each other at 127.0.0.1:PORT, not on {socket}"
		}
		for j, kv := range m.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				ps[fmt.Sprintf("%senv[%d]", f, j)] = fmt.Sprintf("want KEY=VALUE, got %q", kv)
			}
		}
		if m.WorkingDir != "" && !filepath.IsAbs(m.WorkingDir) {
			ps[f+"working_dir"] = fmt.Sprintf("want an absolute path, got %q", m.WorkingDir)
		}
		if m.Probe != "" && m.Probe != ProbeTCP && !strings.HasPrefix(m.Probe, "/") {
			ps[f+"probe"] = fmt.Sprintf(`want "tcp" or an HTTP path starting with /, got %q`, m.Probe)
		}
	}
	out := make([]provider.Problem, 0, len(ps)+1)
	if len(homeCommand) > 0 {
		out = append(out, provider.Problemf("command", "a group's commands are its members': set options.members[].command instead"))
	}
	for _, k := range slices.Sorted(maps.Keys(ps)) {
		out = append(out, provider.Problem{Field: "options." + k, Msg: ps[k]})
	}
	return out
}
