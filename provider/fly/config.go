// Package fly runs homes as Fly Machines through the Machines REST API.
//
// A wake starts the machine (a suspended machine resumes from its
// snapshot) and waits for it to be started; a suspend and a stop wait for
// their state too; a recreate updates the machine with its full config and
// a new image while holding the machine's lease. Every call passes a
// limiter per machine and action that keeps to the API's documented rate
// limits, is retried on 429 and 5xx with backoff (honouring Retry-After),
// and is bounded by the caller's context. Health reads the machine's
// checks for the wake's health rung (DESIGN rule 11, health.go).
package fly

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// Defaults of Config.
const (
	// DefaultBaseURL is the public Machines API. From inside Fly's private
	// network use http://_api.internal:4280.
	DefaultBaseURL = "https://api.machines.dev"
	// DefaultEndpoint is where a home listens, on Fly's private network.
	DefaultEndpoint = "http://{machine_id}.vm.{app}.internal:{port}"
	// DefaultPort is the port homes listen on inside their machine.
	DefaultPort = 8080
	// DefaultVersionKey is the metadata key holding a home's version.
	DefaultVersionKey = "wakegate_version"
)

// Version sources (Config.VersionFrom).
const (
	// VersionMetadata reads the version from the machine's metadata key
	// VersionKey, which a recreate sets together with the image.
	VersionMetadata = "metadata"
	// VersionExec runs VersionCommand in the guest (POST .../exec) and
	// takes its trimmed standard output.
	VersionExec = "exec"
	// VersionHTTP asks the home itself: GET {endpoint}/version.
	VersionHTTP = "http"
)

// Config is the provider's config section (fly: in the gateway config).
// Every field says its default; Defaults fills them once.
type Config struct {
	// App is the Fly app whose machines are homes. Required.
	App string `yaml:"app" json:"app"`
	// Token is a secret reference to the API token: env:NAME or
	// file:PATH. Required.
	Token string `yaml:"token" json:"token"`
	// BaseURL is the Machines API. Default https://api.machines.dev;
	// http://_api.internal:4280 from inside Fly.
	BaseURL string `yaml:"base_url" json:"base_url"`
	// Endpoint is the template of a home's upstream base URL, with
	// {machine_id}, {app}, {port}, {id} (home id), {target}, {region} and
	// {private_ip}. Default http://{machine_id}.vm.{app}.internal:{port}.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Port is the port homes listen on (a home's own port option wins).
	// Default 8080.
	Port int `yaml:"port" json:"port"`
	// Image is the template of the image a roll recreates a home on when
	// its target names no image, with {version}. Default none: such a
	// roll fails with fly_no_image.
	Image string `yaml:"image" json:"image"`
	// VersionFrom is how a home's running version is read: "metadata"
	// (default), "exec" or "http".
	VersionFrom string `yaml:"version_from" json:"version_from"`
	// VersionKey is the metadata key holding the version, set by every
	// recreate. Default wakegate_version.
	VersionKey string `yaml:"version_key" json:"version_key"`
	// VersionCommand is the command run in the guest for VersionFrom
	// "exec", e.g. "cat /etc/home-version". Required for "exec".
	VersionCommand string `yaml:"version_command" json:"version_command"`
	// StopSignal is the signal a stop sends. Default SIGTERM.
	StopSignal string `yaml:"stop_signal" json:"stop_signal"`
	// StopTimeout is how long a stop lets the guest exit before it is
	// killed. Default 10s.
	StopTimeout time.Duration `yaml:"stop_timeout" json:"stop_timeout"`
	// LeaseTTL is how long a recreate's lease lasts if it is neither
	// renewed nor released (the gateway died mid-roll). A recreate renews
	// it every third of it (at most once a second) while it holds it.
	// Default 60s; at least 2s; whole seconds.
	LeaseTTL time.Duration `yaml:"lease_ttl" json:"lease_ttl"`
	// CallTimeout bounds one API call made with no deadline of its own
	// (an operator's status read). Default 30s. Calls made for a wake are
	// bounded by the wake's deadline instead.
	CallTimeout time.Duration `yaml:"call_timeout" json:"call_timeout"`
}

// Defaults fills every zero field with its default.
func (c *Config) Defaults() {
	def := func(s *string, v string) {
		if strings.TrimSpace(*s) == "" {
			*s = v
		}
	}
	def(&c.BaseURL, DefaultBaseURL)
	def(&c.Endpoint, DefaultEndpoint)
	def(&c.VersionFrom, VersionMetadata)
	def(&c.VersionKey, DefaultVersionKey)
	def(&c.StopSignal, "SIGTERM")
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 60 * time.Second
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 30 * time.Second
	}
}

// FieldError is one invalid field of a Config or HomeOptions.
type FieldError struct {
	Field string // the field's config name, e.g. "base_url"
	Msg   string // what is wrong and what is wanted
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// signals are the stop signals the API accepts.
var signals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM"}

// Validate checks a defaulted Config and returns every problem found,
// each naming its field. It does not resolve the token.
func (c *Config) Validate() []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if !validName(c.App) {
		bad("app", "want the Fly app name (lowercase letters, digits and dashes), got %q", c.App)
	}
	if kind, arg, ok := strings.Cut(c.Token, ":"); !ok || arg == "" || (kind != "env" && kind != "file") {
		bad("token", "want a secret reference env:NAME or file:PATH, got %q", redact(c.Token))
	}
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base_url", "want an http(s) URL such as %s, got %q", DefaultBaseURL, c.BaseURL)
	}
	if err := checkTemplate(c.Endpoint); err != nil {
		bad("endpoint", "%v", err)
	}
	if c.Port < 1 || c.Port > 65535 {
		bad("port", "want a port 1-65535, got %d", c.Port)
	}
	if c.Image != "" && !strings.Contains(c.Image, "{version}") {
		bad("image", "want an image template with {version}, e.g. registry.fly.io/homes:{version}, got %q", c.Image)
	}
	switch c.VersionFrom {
	case VersionMetadata, VersionHTTP:
	case VersionExec:
		if strings.TrimSpace(c.VersionCommand) == "" {
			bad("version_command", "version_from exec needs a command, e.g. \"cat /etc/home-version\"")
		}
	default:
		bad("version_from", "want metadata, exec or http, got %q", c.VersionFrom)
	}
	if !validKey(c.VersionKey) {
		bad("version_key", "want a metadata key (letters, digits, _ and -), got %q", c.VersionKey)
	}
	if !slices.Contains(signals, c.StopSignal) {
		bad("stop_signal", "want one of %s, got %q", strings.Join(signals, ", "), c.StopSignal)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{{"stop_timeout", c.StopTimeout, 0}, {"lease_ttl", c.LeaseTTL, 2 * time.Second}, {"call_timeout", c.CallTimeout, time.Second}} {
		if d.v < d.min {
			bad(d.name, "want a duration of at least %s, got %s", d.min, d.v)
		}
	}
	return errs
}

// HomeOptions are a fly home's own settings.
type HomeOptions struct {
	// Machine is the id of the home's Fly Machine. Required.
	Machine string `yaml:"machine" json:"machine"`
	// Port overrides Config.Port for this home. Default 0: Config.Port.
	Port int `yaml:"port,omitempty" json:"port,omitempty"`
}

// Validate checks a home's options.
func (o HomeOptions) Validate() []*FieldError {
	var errs []*FieldError
	if !validMachineID(o.Machine) {
		errs = append(errs, &FieldError{Field: "machine", Msg: fmt.Sprintf("want a Fly Machine id (letters and digits), got %q", o.Machine)})
	}
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, &FieldError{Field: "port", Msg: fmt.Sprintf("want a port 1-65535 or 0 (the provider's port), got %d", o.Port)})
	}
	return errs
}

// placeholders are the names an endpoint template may use.
var placeholders = []string{"machine_id", "app", "port", "id", "target", "region", "private_ip"}

func checkTemplate(t string) error {
	rest := t
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("unclosed { in %q", t)
		}
		if name := rest[i+1 : i+j]; !slices.Contains(placeholders, name) {
			return fmt.Errorf("unknown placeholder {%s} in %q; known: {%s}", name, t, strings.Join(placeholders, "}, {"))
		}
		rest = rest[i+j+1:]
	}
	probe := strings.NewReplacer("{machine_id}", "m", "{app}", "a", "{port}", "1", "{id}", "h",
		"{target}", "t", "{region}", "r", "{private_ip}", "[::1]").Replace(t)
	if u, err := url.Parse(probe); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("want an http(s) URL template such as %s, got %q", DefaultEndpoint, t)
	}
	return nil
}

// expand fills an endpoint template.
func expand(t string, vars map[string]string) string {
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(t)
}

// validName, validMachineID and validKey check an app's name (1-63 of
// [a-z0-9-]), a machine id (1-64 of [a-zA-Z0-9]) and a metadata key (1-64
// of [a-zA-Z0-9_-]).
func validName(s string) bool      { return validChars(s, 63, false, "-") }
func validMachineID(s string) bool { return validChars(s, 64, true, "") }
func validKey(s string) bool       { return validChars(s, 64, true, "_-") }

// validChars reports whether s has 1 to most characters, each a lowercase
// ASCII letter, a digit, an uppercase letter when upper, or one of extra.
func validChars(s string, most int, upper bool, extra string) bool {
	if s == "" || len(s) > most {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case upper && r >= 'A' && r <= 'Z':
		case strings.ContainsRune(extra, r):
		default:
			return false
		}
	}
	return true
}

// redact keeps a mistaken token out of an error message: a value that is
// not a reference is shown by its length only.
func redact(s string) string {
	if strings.HasPrefix(s, "env:") || strings.HasPrefix(s, "file:") || s == "" {
		return s
	}
	return "<" + strconv.Itoa(len(s)) + " characters, not a reference>"
}

// resolveToken reads the token's secret reference (checked by validate).
func resolveToken(ref string) (string, error) {
	v, err := provider.ResolveSecret(ref)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return v, nil
}
