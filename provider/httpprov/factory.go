package httpprov

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// Section is the provider's config section, providers.http.
type Section struct {
	// BaseURL is the control plane's base URL, http or https; operations
	// go to {base_url}/homes/{id}/... Required.
	BaseURL string `yaml:"base_url"`
	// Secret is a secret reference, "env:NAME" or "file:PATH", whose value
	// (16 bytes or more) is the HMAC key shared with the control plane.
	// Required.
	Secret string `yaml:"secret"`
	// RequestTimeout bounds one HTTP request. Default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// PollInterval is the pause between two status polls of a slow
	// operation when the control plane sends no Retry-After. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// LongPoll is the longest wait a status poll asks of the control
	// plane. Default 10s.
	LongPoll time.Duration `yaml:"long_poll"`
	// Retries is how many times a request is retried after a connection
	// failure, 429 or 5xx, within the operation's deadline. Default 4
	// (when unset); 0 means never.
	Retries *int `yaml:"retries"`
	// OpTimeout bounds an operation that has no deadline of its own.
	// Default 2m.
	OpTimeout time.Duration `yaml:"op_timeout"`
}

// sectionFields are the section's keys, for the unknown-key check.
var sectionFields = []string{"base_url", "secret", "request_timeout", "poll_interval", "long_poll", "retries", "op_timeout"}

// Factory is the http provider's Factory: built only when providers.http
// is configured. A home may set a command (sent to the control plane) and
// any options (passed on as they are), but no env or working_dir.
func Factory() provider.Factory {
	return provider.Factory{
		NeedsSection: true,
		CheckSection: checkSection,
		CheckHome:    checkHome,
		New: func(_ provider.Env, sec provider.Section) (provider.Provider, error) {
			if sec == nil {
				return nil, fmt.Errorf("the section providers.http is required")
			}
			var s Section
			if err := sec.Decode(&s); err != nil {
				return nil, fmt.Errorf("providers.http: %w", err)
			}
			c, err := s.config()
			if err != nil {
				return nil, err
			}
			return New(c)
		},
	}
}

// config turns the section into the client's Config, reading the secret.
func (s Section) config() (Config, error) {
	secret, err := provider.ResolveSecret(s.Secret)
	if err != nil {
		return Config{}, fmt.Errorf("secret: %w", err)
	}
	c := Config{BaseURL: s.BaseURL, Secret: []byte(secret), RequestTimeout: s.RequestTimeout,
		PollInterval: s.PollInterval, LongPoll: s.LongPoll, OpTimeout: s.OpTimeout}
	if s.Retries != nil {
		c.Retries = *s.Retries
		if c.Retries == 0 {
			c.Retries = -1
		}
	}
	return c, nil
}

// checkSection names every problem of the section.
func checkSection(sec provider.Section) []provider.Problem {
	var raw map[string]any
	if err := sec.Decode(&raw); err != nil {
		return []provider.Problem{provider.Problemf("", "want a mapping: %v", err)}
	}
	var ps []provider.Problem
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(sectionFields, k) {
			ps = append(ps, provider.Problemf(k, "unknown field (known: %s)", strings.Join(sectionFields, ", ")))
		}
	}
	var s Section
	if err := sec.Decode(&s); err != nil {
		return append(ps, provider.Problemf("", "%v", err))
	}
	if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps = append(ps, provider.Problemf("base_url", "want the control plane's http or https URL, got %q", s.BaseURL))
	}
	if v, err := provider.ResolveSecret(s.Secret); err != nil {
		ps = append(ps, provider.Problemf("secret", "%v", err))
	} else if len(v) < 16 {
		ps = append(ps, provider.Problemf("secret", "want at least 16 bytes, got %d", len(v)))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"request_timeout", s.RequestTimeout}, {"poll_interval", s.PollInterval}, {"long_poll", s.LongPoll}, {"op_timeout", s.OpTimeout}} {
		if d.v < 0 {
			ps = append(ps, provider.Problemf(d.field, "want a positive duration or nothing for the default, got %s", d.v))
		}
	}
	if s.Retries != nil && *s.Retries < 0 {
		ps = append(ps, provider.Problemf("retries", "want 0 or more, got %d", *s.Retries))
	}
	return ps
}

// checkHome refuses what an http home cannot have: its control plane
// runs it, so env and working_dir belong in its options.
func checkHome(s provider.Settings) []provider.Problem {
	var ps []provider.Problem
	if len(s.Env) > 0 {
		ps = append(ps, provider.Problemf("env", "an http home's environment is its control plane's: put what it needs in options"))
	}
	if s.Dir != "" {
		ps = append(ps, provider.Problemf("working_dir", "an http home's working directory is its control plane's: put what it needs in options"))
	}
	return ps
}
