package config

import (
	"fmt"
	"sort"
	"strings"
)

// Isolation warnings: what a config leaves shared between tenants. Every
// home runs someone's code (DESIGN rule 31), and a browser isolates by
// origin only. Under path routing (/node/{target}, /apps/{slug}) every
// home is on the gateway's one origin: a page of one home may read the
// others' pages with the visitor's credentials, their cookies and their
// storage. That is fine for homes of one owner and wrong for homes of
// several, where host routing (hosts.nodes_domain, hosts.apps_domain)
// gives each home an origin of its own.
//
// A home's owner is the owner its access rule names (access.homes[].owner),
// else its target: a jwt policy admits a token for a home when its claim
// names the target or that owner, so homes with no owner in common are
// reachable by different people.

// HomeOwnership is what the warnings read of one home.
type HomeOwnership struct {
	ID, Target string
	// Relay identifies the home's relay token (its reference in a config,
	// the resolved secret at run time); "" for none. Never printed.
	Relay string
}

// IsolationWarningsOf returns one sentence per thing the homes share that
// tenants should not, for check-config, the start log and status.
// nodesDomain is hosts.nodes_domain; owner gives a target's configured
// owner ("" for none).
func IsolationWarningsOf(nodesDomain string, homes []HomeOwnership, owner func(target string) string) []string {
	var out []string
	if nodesDomain == "" && len(homes) > 1 {
		owners := map[string]bool{}
		for _, h := range homes {
			o := owner(h.Target)
			if o == "" {
				o = h.Target
			}
			owners[o] = true
		}
		if len(owners) > 1 {
			out = append(out, fmt.Sprintf("path routing serves homes of %d owners (%s) on one origin: "+
				"a page in one home can read the others' pages with the visitor's credentials, and their cookies and storage; "+
				"give each home its own origin with hosts.nodes_domain (and hosts.apps_domain for apps in homes), "+
				"or give homes of one owner the same access.homes[].owner (docs/security.md)",
				len(owners), someNames(owners)))
		}
	}
	byRelay := map[string][]string{}
	for _, h := range homes {
		if h.Relay != "" {
			byRelay[h.Relay] = append(byRelay[h.Relay], h.ID)
		}
	}
	var shared []string
	for _, ids := range byRelay {
		if len(ids) > 1 {
			sort.Strings(ids)
			shared = append(shared, fmt.Sprintf("homes %s share one relay token: each of them can use it to "+
				"pass for the others; give every home a relay_token of its own", strings.Join(ids, ", ")))
		}
	}
	sort.Strings(shared)
	return append(out, shared...)
}

// someNames lists up to three of names, sorted, and how many more.
func someNames(names map[string]bool) string {
	all := make([]string, 0, len(names))
	for n := range names {
		all = append(all, n)
	}
	sort.Strings(all)
	if len(all) > 3 {
		return strings.Join(all[:3], ", ") + fmt.Sprintf(" and %d more", len(all)-3)
	}
	return strings.Join(all, ", ")
}

// IsolationWarnings returns what c's homes share that tenants should not
// (wakegate check-config prints them; the gateway logs them at start and
// status lists them): homes of several owners on one origin, and homes
// that share a relay token reference.
func (c *Config) IsolationWarnings() []string {
	homes := make([]HomeOwnership, 0, len(c.Homes))
	for _, h := range c.Homes {
		target := h.Target
		if target == "" {
			target = h.ID
		}
		homes = append(homes, HomeOwnership{ID: h.ID, Target: target, Relay: h.RelayToken})
	}
	return IsolationWarningsOf(c.Hosts.NodesDomain, homes, c.accessOwner)
}

// accessOwner is the owner access.homes names for target ("" for none).
func (c *Config) accessOwner(target string) string {
	for _, r := range c.Access.Homes {
		if r.Target == target {
			return r.Owner
		}
	}
	return ""
}
