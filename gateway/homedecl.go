package gateway

import (
	"fmt"
	"reflect"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// homeDecl is a home as the config file (HomeConfig) or the admin API
// (admin.HomeRequest) declares it, with its defaults filled from the global
// sections: the one shape in which both are checked (check), registered
// (spec) and stored (store, fromRecord), so that they accept the same
// settings with the same rules.
type homeDecl struct {
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
	Settings provider.Settings
}

// probeKinds are the probe kinds a home may name.
var probeKinds = []string{"auto", "ws", "http", "tcp"}

// check returns d's problems, each naming its field as the config file
// and the admin API spell it (probe, probe.path, ready_timeout, command,
// options.endpoint, ...). reg and avail check the provider's part.
func (d homeDecl) check(reg *provider.Registry, avail []string) []provider.Problem {
	var ps []provider.Problem
	bad := func(field, format string, args ...any) { ps = append(ps, provider.Problemf(field, format, args...)) }
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
	return append(ps, reg.CheckHome(d.Provider, avail, d.Settings)...)
}

// spec is d as the engine registers it; token is the resolved relay token.
func (d homeDecl) spec(token string) wake.HomeSpec {
	return wake.HomeSpec{ID: d.ID, Target: d.Target, Provider: d.Provider, Version: d.Version,
		RelayToken: token, IdleTimeout: d.IdleTimeout, Probe: wake.ProbeKind(d.Probe.Kind),
		ProbePath: d.Probe.Path, ProbeStatuses: d.Probe.Statuses, ProbeSettle: d.Probe.Settle.Duration(),
		ReadyTimeout: d.ReadyTimeout, Settings: d.Settings}
}

// store writes what restoring d needs into rec (a dynamic home's record).
func (d homeDecl) store(rec *registry.Home) {
	rec.ID, rec.Target, rec.Provider, rec.Version, rec.RelayTokenRef = d.ID, d.Target, d.Provider, d.Version, d.RelayToken
	rec.IdleTimeout, rec.Probe = d.IdleTimeout, d.Probe.Kind
	rec.Settings = registry.HomeSettings{Command: d.Settings.Command, Env: d.Settings.Env, WorkingDir: d.Settings.Dir,
		ProbePath: d.Probe.Path, ProbeStatuses: d.Probe.Statuses, ProbeSettle: d.Probe.Settle,
		ReadyTimeout: registry.Duration(d.ReadyTimeout), Options: d.Settings.Options}
}

// declFromRecord is the home a stored record declares, with w's defaults
// for what it leaves unset (a record written before a setting existed).
func declFromRecord(rec registry.Home, w *WakeConfig) homeDecl {
	st := rec.Settings
	d := homeDecl{ID: rec.ID, Target: rec.Target, Provider: rec.Provider, Version: rec.Version,
		RelayToken: rec.RelayTokenRef, IdleTimeout: rec.IdleTimeout, ReadyTimeout: st.ReadyTimeout.Duration(),
		Probe:    registry.HomeProbe{Kind: rec.Probe, Path: st.ProbePath, Statuses: st.ProbeStatuses, Settle: st.ProbeSettle},
		Settings: provider.Settings{Command: st.Command, Env: st.Env, Dir: st.WorkingDir, Options: st.Options}}
	if d.Probe.Kind == "" {
		d.Probe.Kind = w.Probe.Kind
	}
	return d
}

// sameSpec reports whether a and b register the same home, relay token
// aside (compared by the caller, which holds the references) and version
// aside (the engine reads it from the record; a roll changes it).
func sameSpec(a, b wake.HomeSpec) bool {
	a.RelayToken, b.RelayToken = "", ""
	a.Version, b.Version = "", ""
	return reflect.DeepEqual(normSpec(a), normSpec(b))
}

// normSpec makes empty lists nil, so that a record read back compares equal.
func normSpec(s wake.HomeSpec) wake.HomeSpec {
	if len(s.ProbeStatuses) == 0 {
		s.ProbeStatuses = nil
	}
	if len(s.Settings.Command) == 0 {
		s.Settings.Command = nil
	}
	if len(s.Settings.Env) == 0 {
		s.Settings.Env = nil
	}
	if len(s.Settings.Options) == 0 {
		s.Settings.Options = nil
	}
	return s
}
