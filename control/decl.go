package control

import (
	"reflect"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// DeclSpec is d as the engine registers it; token is the resolved relay
// token.
func DeclSpec(d config.HomeDecl, token string) homes.Spec {
	return homes.Spec{ID: d.ID, Target: d.Target, Provider: d.Provider, Version: d.Version,
		RelayToken: token, IdleTimeout: d.IdleTimeout, Probe: probe.Kind(d.Probe.Kind),
		ProbePath: d.Probe.Path, ProbeStatuses: d.Probe.Statuses, ProbeSettle: d.Probe.Settle.Duration(),
		ReadyTimeout: d.ReadyTimeout, Settings: d.Settings, Schedule: d.Schedule}
}

// storeDecl writes what restoring d needs into rec (a dynamic home's
// record).
func storeDecl(d config.HomeDecl, rec *registry.Home) {
	rec.ID, rec.Target, rec.Provider, rec.Version, rec.RelayTokenRef = d.ID, d.Target, d.Provider, d.Version, d.RelayToken
	rec.IdleTimeout, rec.Probe = d.IdleTimeout, d.Probe.Kind
	rec.Settings = registry.HomeSettings{Command: d.Settings.Command, Env: d.Settings.Env, WorkingDir: d.Settings.Dir,
		ProbePath: d.Probe.Path, ProbeStatuses: d.Probe.Statuses, ProbeSettle: d.Probe.Settle,
		ReadyTimeout: registry.Duration(d.ReadyTimeout), Options: d.Settings.Options}
}

// DeclFromRecord is the home a stored record declares, with w's defaults
// for what it leaves unset (a record written before a setting existed).
func DeclFromRecord(rec registry.Home, w *config.WakeConfig) config.HomeDecl {
	st := rec.Settings
	d := config.HomeDecl{ID: rec.ID, Target: rec.Target, Provider: rec.Provider, Version: rec.Version,
		RelayToken: rec.RelayTokenRef, IdleTimeout: rec.IdleTimeout, ReadyTimeout: st.ReadyTimeout.Duration(),
		Probe:    registry.HomeProbe{Kind: rec.Probe, Path: st.ProbePath, Statuses: st.ProbeStatuses, Settle: st.ProbeSettle},
		Settings: provider.Settings{Command: st.Command, Env: st.Env, Dir: st.WorkingDir, Options: st.Options}}
	if d.Probe.Kind == "" {
		d.Probe.Kind = w.Probe.Kind
	}
	return d
}

// SameSpec reports whether a and b register the same home, relay token
// aside (compared by the caller, which holds the references) and version
// aside (the engine reads it from the record; a roll changes it).
func SameSpec(a, b homes.Spec) bool {
	a.RelayToken, b.RelayToken = "", ""
	a.Version, b.Version = "", ""
	return reflect.DeepEqual(normSpec(a), normSpec(b))
}

// normSpec makes empty lists nil, so that a record read back compares equal.
func normSpec(s homes.Spec) homes.Spec {
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
