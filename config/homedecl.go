package config

import (
	"fmt"
	"time"

	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/schedule"
)

// HomeDecl is a home as the config file (HomeConfig) or the admin API
// (admin.HomeRequest, converted by the control plane's admin adapter)
// declares it, with its defaults filled from the global sections: the one
// shape in which both are checked (Check), registered with the wake engine
// and stored (package control), so that they accept the same settings with
// the same rules.
type HomeDecl struct {
	ID, Target, Provider, Version string
	// RelayToken is a secret reference; "" for none.
	RelayToken string
	// Probe is the home's probe, its Kind filled.
	Probe registry.HomeProbe
	// IdleTimeout (zero: never suspended) is the home's own or the wake
	// section's; ReadyTimeout is the home's own, zero for the wake
	// section's (wake.ready_timeout, also when that changes).
	IdleTimeout, ReadyTimeout time.Duration
	// Settings are its provider settings: command, env, working dir and
	// options.
	Settings provconf.Settings
	// Schedule is its running hours; nil for none. Only the config file
	// declares them: a home of the admin API has none.
	Schedule *schedule.Schedule
}

// probeKinds are the probe kinds a home may name.
var probeKinds = []string{"auto", "ws", "http", "tcp"}

// Check returns d's problems, each naming its field as the config file
// and the admin API spell it (probe, probe.path, ready_timeout, command,
// options.endpoint, ...). table and avail check the provider's part.
func (d HomeDecl) Check(table ProviderTable, avail []string) []provconf.Problem {
	var ps []provconf.Problem
	bad := func(field, format string, args ...any) { ps = append(ps, provconf.Problemf(field, format, args...)) }
	if !idRE.MatchString(d.ID) {
		bad("id", "want 1-63 of [a-z0-9._-] starting with a letter or digit, got %q", d.ID)
	}
	if !registry.ValidSlug(d.Target) {
		bad("target", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", d.Target)
	}
	kindField := "probe.kind"
	if d.Probe.KindOnly() {
		kindField = "probe"
	}
	known := false
	for _, k := range probeKinds {
		known = known || d.Probe.Kind == k
	}
	if !known {
		bad(kindField, "want auto, ws, http or tcp, got %q", d.Probe.Kind)
	}
	if p := d.Probe.Path; p != "" && p[0] != '/' {
		bad("probe.path", "must start with /, got %q", p)
	}
	for i, s := range d.Probe.Statuses {
		if s < 100 || s > 599 {
			bad(fmt.Sprintf("probe.statuses[%d]", i), "want an HTTP status from 100 to 599, got %d", s)
		}
	}
	if d.Probe.Settle < 0 {
		bad("probe.settle", "must not be negative, got %s", d.Probe.Settle)
	}
	if d.IdleTimeout < 0 {
		bad("idle_timeout", "must not be negative, got %s", d.IdleTimeout)
	}
	if d.ReadyTimeout < 0 {
		bad("ready_timeout", "must not be negative, got %s", d.ReadyTimeout)
	}
	return append(ps, table.CheckHome(d.Provider, avail, d.Settings)...)
}

// ValidHomeID reports whether id is a valid home id: 1-63 of [a-z0-9._-]
// starting with a letter or digit.
func ValidHomeID(id string) bool { return idRE.MatchString(id) }
