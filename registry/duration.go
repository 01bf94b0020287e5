package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration that reads and writes the form "2s" in YAML
// and JSON, so that one record type serves as a config entry, an admin API
// body and a stored record (see App). It lives in registry because registry
// is the lowest package that the config, the admin API and the engine all
// import: a type here costs none of them an import cycle.
//
// A bare 0 reads as zero. Any other number is refused: a unit is always
// required, so that 2 never silently means two nanoseconds.
type Duration time.Duration

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration parses "2s", "150ms", "1h30m" or a bare "0".
func ParseDuration(s string) (Duration, error) {
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 2s, got %q", s)
	}
	return Duration(v), nil
}

// MarshalJSON writes d as a string such as "2s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(d.String())), nil
}

// UnmarshalJSON reads a string such as "2s" (or a bare 0). A bad value is
// a *json.UnmarshalTypeError, which encoding/json completes with the name
// of the field that holds it (e.g. "health.interval").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if string(b) == "0" {
		*d = 0
		return nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Duration]()}
	}
	v, err := ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[Duration]()}
	}
	*d = v
	return nil
}

// MarshalYAML writes d as a string such as "2s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration such as "2s" (or a bare 0). A bad value is
// a *yaml.TypeError carrying the value's line, so that decoding goes on and
// every other problem in the file is reported too.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration such as 2s", n.Line)}}
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*d = v
	return nil
}
