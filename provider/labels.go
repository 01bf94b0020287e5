package provider

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Labels (or annotations) that make a runtime's object a home without a
// config entry, where its provider discovers homes: a container (docker)
// or a Deployment (kubernetes). Every provider that discovers reads the
// same keys with ParseLabels.
const (
	// LabelEnable must be "true": the object is a home.
	LabelEnable = "wakegate.enable"
	// LabelID is the home's id. Default: the object's name.
	LabelID = "wakegate.id"
	// LabelTarget is the name in /node/{target}. Default: the home's id.
	LabelTarget = "wakegate.target"
	// LabelPort is the port the gateway forwards to. Default: the
	// provider's (docker: the one TCP port the image exposes).
	LabelPort = "wakegate.port"
	// LabelProbe is the readiness probe's kind: auto, ws, http or tcp.
	// Default: wake.probe's.
	LabelProbe = "wakegate.probe"
	// LabelIdleTimeout is the home's idle timeout, a duration ("0s": never
	// suspended). Default: wake.idle_timeout.
	LabelIdleTimeout = "wakegate.idle_timeout"
)

// Labelled is a home as an object's labels declare it.
type Labelled struct {
	ID     string
	Target string
	Port   int    // 0: not set
	Probe  string // "": wake.probe's kind
	// IdleTimeout is the label's duration as written; "": the default.
	IdleTimeout string
}

// homeNameRE is what a home id and a target may be.
var homeNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName reports whether s may be a home's id or target: 1-63 of
// [a-z0-9-], starting with a letter or digit.
func ValidName(s string) bool { return homeNameRE.MatchString(s) }

// probeKinds are the values of LabelProbe.
var probeKinds = []string{"auto", "ws", "http", "tcp"}

// ParseLabels reads the home that labels l of the object kind name (a
// "container", a "deployment") declare; the id defaults to name. An error
// names the object and the label.
func ParseLabels(kind, name string, l map[string]string) (Labelled, error) {
	bad := func(label, format string, a ...any) (Labelled, error) {
		return Labelled{}, fmt.Errorf("%s %s: label %s: %s", kind, name, label, fmt.Sprintf(format, a...))
	}
	f := Labelled{ID: name, Probe: l[LabelProbe], IdleTimeout: l[LabelIdleTimeout]}
	if v, ok := l[LabelID]; ok {
		f.ID = v
	}
	if !homeNameRE.MatchString(f.ID) {
		if _, ok := l[LabelID]; !ok {
			return bad(LabelID, "the %s's name is no home id (1-63 of [a-z0-9-], starting with a letter or digit): set one", kind)
		}
		return bad(LabelID, "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", f.ID)
	}
	f.Target = f.ID
	if v, ok := l[LabelTarget]; ok {
		if !homeNameRE.MatchString(v) {
			return bad(LabelTarget, "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", v)
		}
		f.Target = v
	}
	if v, ok := l[LabelPort]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return bad(LabelPort, "not a port number: %q", v)
		}
		f.Port = n
	}
	if f.Probe != "" && !slices.Contains(probeKinds, f.Probe) {
		return bad(LabelProbe, "want one of %s, got %q", strings.Join(probeKinds, ", "), f.Probe)
	}
	if f.IdleTimeout != "" {
		if t, err := time.ParseDuration(f.IdleTimeout); err != nil || t < 0 {
			return bad(LabelIdleTimeout, "want a duration such as 10m or 0s, got %q", f.IdleTimeout)
		}
	}
	return f, nil
}
