// Package provconf holds the terms the config and the providers share, so
// that neither imports the other: a home's Settings for its provider, the
// Problems a check finds in them or in a provider's config Section, and
// secret references (ResolveSecret). Package provider names them too; the
// config reads them here and knows no provider.
package provconf

import (
	"encoding/json"
	"fmt"
)

// Section is a provider's own config section: decode it into the
// provider's config type. A *yaml.Node is a Section.
type Section interface {
	Decode(v any) error
}

// Settings are a home's own settings for its provider: the per-home part
// of every Spec, as a home of the config file or of the admin API declares
// them. Each is optional; zero means the provider's default.
type Settings struct {
	// Command is the home's own command template (exec: program first, with
	// the placeholders of exec.command). Nil: the provider's.
	Command []string `json:"command,omitempty"`
	// Env is extra KEY=VALUE entries for the home's environment, after the
	// provider's own.
	Env []string `json:"env,omitempty"`
	// Dir is the home's working directory (exec: absolute; default the
	// home's own data folder).
	Dir string `json:"working_dir,omitempty"`
	// Options are provider-specific settings, a JSON object checked by the
	// provider's Factory.CheckHome (package provider). Empty: none.
	Options json.RawMessage `json:"options,omitempty"`
}

// Problem is one thing wrong in a config section or a home's settings.
// Field is dotted and relative to what was checked ("options.region",
// "command", "token"); "" for the whole.
type Problem struct {
	Field string
	Msg   string
}

// Problemf returns a Problem with a formatted message.
func Problemf(field, format string, args ...any) Problem {
	return Problem{Field: field, Msg: fmt.Sprintf(format, args...)}
}
