package registry

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// HomeProbe is how a home's readiness is proven, when it differs from the
// gateway's wake.probe: one shape for the config file, the admin API and the
// stored record. It reads either a kind alone ("http") or a mapping of its
// fields, in YAML and JSON alike, and writes the kind alone when that is all
// it holds.
type HomeProbe struct {
	// Kind is "auto", "ws", "http" or "tcp".
	// Default (empty): wake.probe.kind.
	Kind string `json:"kind,omitempty" yaml:"kind"`
	// Path is the http probe's path (may contain {target}). Default
	// (empty): wake.probe.path.
	Path string `json:"path,omitempty" yaml:"path"`
	// Statuses, when set, are the only statuses the GET of an http or
	// auto probe accepts (for auto: the GET of the probe's path; the
	// health paths of the home's apps keep their kind's rules, and a
	// WebSocket upgrade still passes). Default (empty): 2xx and 3xx.
	Statuses []int `json:"statuses,omitempty" yaml:"statuses"`
	// Settle is how long a ws probe's socket must stay open when no first
	// frame arrives. Default (zero): wake.probe.settle.
	Settle Duration `json:"settle,omitempty" yaml:"settle"`
}

// homeProbeFields is HomeProbe without its methods, for decoding.
type homeProbeFields HomeProbe

// KindOnly reports whether p holds nothing but its kind.
func (p HomeProbe) KindOnly() bool {
	return p.Path == "" && len(p.Statuses) == 0 && p.Settle == 0
}

// MarshalJSON writes the kind alone as a string, or else an object.
func (p HomeProbe) MarshalJSON() ([]byte, error) {
	if p.KindOnly() {
		return json.Marshal(p.Kind)
	}
	return json.Marshal(homeProbeFields(p))
}

// UnmarshalJSON reads a kind ("http") or an object of fields, refusing
// unknown ones.
func (p *HomeProbe) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*p = HomeProbe{}
		return json.Unmarshal(b, &p.Kind)
	}
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var f homeProbeFields
	if err := d.Decode(&f); err != nil {
		return fmt.Errorf("probe: want a kind such as \"http\" or an object of kind, path, statuses and settle: %w", err)
	}
	*p = HomeProbe(f)
	return nil
}

// MarshalYAML writes the kind alone, or else a mapping.
func (p HomeProbe) MarshalYAML() (any, error) {
	if p.KindOnly() {
		return p.Kind, nil
	}
	return homeProbeFields(p), nil
}

// UnmarshalYAML reads a kind (probe: http) or a mapping of fields.
func (p *HomeProbe) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*p = HomeProbe{Kind: n.Value}
		return nil
	}
	var f homeProbeFields
	if err := n.Decode(&f); err != nil {
		return err
	}
	*p = HomeProbe(f)
	return nil
}

// HomeSettings are a home's own settings beyond its id, target and
// version, kept in the stored record of a home registered through the
// admin API so that a restart registers it as it was. Each is optional;
// zero means the gateway's default.
type HomeSettings struct {
	// Command is the home's own command template (exec).
	Command []string `json:"command,omitempty"`
	// Env is extra KEY=VALUE entries for its environment.
	Env []string `json:"env,omitempty"`
	// WorkingDir is its working directory, absolute.
	WorkingDir string `json:"working_dir,omitempty"`
	// ProbePath, ProbeStatuses and ProbeSettle are its probe's details
	// (HomeProbe; the kind is Home.Probe).
	ProbePath     string   `json:"probe_path,omitempty"`
	ProbeStatuses []int    `json:"probe_statuses,omitempty"`
	ProbeSettle   Duration `json:"probe_settle,omitempty"`
	// ReadyTimeout bounds its wakes; zero: wake.ready_timeout.
	ReadyTimeout Duration `json:"ready_timeout,omitempty"`
	// Options are its provider-specific settings, a JSON object.
	Options json.RawMessage `json:"options,omitempty"`
}
