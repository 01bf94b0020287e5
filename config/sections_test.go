package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/all"
)

// The checks and defaults of single sections, each with the field it
// names.

func TestRollConfigErrorsNameTheField(t *testing.T) {
	text := `
roll:
  mode: sometimes
  idle_after: -1s
  target:
    command: [""]
`
	_, err := all.Load("roll.yaml", []byte(text))
	if err == nil {
		t.Fatal("a bad roll section loaded")
	}
	for _, want := range []string{
		`roll.yaml:3: roll.mode: want lazy, eager or off, got "sometimes"`,
		"roll.yaml:4: roll.idle_after: must not be negative",
		"roll.yaml:5: roll.target.version: required when roll.target.command or roll.target.image is set",
		"roll.yaml:6: roll.target.command: must name a program",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	c, err := all.Load("roll.yaml", []byte("homes: [{id: h1}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Roll.Mode != "lazy" || c.Roll.IdleAfter != time.Minute || c.Roll.Target.Version != "" {
		t.Fatalf("roll defaults: %+v", c.Roll)
	}
}

// TestRootRedirectChecked: a root_redirect that is neither an http(s) URL
// nor a path is a config error naming the field.
func TestRootRedirectChecked(t *testing.T) {
	for _, v := range []string{"ftp://x/", "//evil.example/", "welcome"} {
		_, err := all.Load("c.yaml", []byte("server:\n  root_redirect: \""+v+"\"\n"))
		if err == nil || !strings.Contains(err.Error(), "c.yaml:2: server.root_redirect") {
			t.Errorf("root_redirect %q: err %v", v, err)
		}
	}
}

func TestAppConfigDefaultsAndErrors(t *testing.T) {
	cfg, err := all.Load("ok.yaml", []byte("apps:\n  - slug: a\n    upstream: http://127.0.0.1:9/\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Apps[0]
	if a.Health.Type != "http" || a.Health.Path != "/" || a.Health.Interval.Duration() != 2*time.Second || a.Health.Timeout.Duration() != 2*time.Second ||
		a.Health.StartPeriod != 0 || a.DesiredState != "running" || a.FailureThreshold != 3 || a.MinRefresh.Duration() != time.Second ||
		a.RefreshTimeout.Duration() != 30*time.Second {
		t.Fatalf("defaults: %+v", a)
	}
	_, err = all.Load("bad.yaml", []byte(`homes:
  - id: h
apps:
  - slug: a
    upstream: http://127.0.0.1:9/
    path: /x
    health: {type: udp, path: healthz, interval: -1s}
    desired_state: paused
    failure_threshold: -2
  - slug: b
    home: h
    path: nope
`))
	var errs config.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("want ConfigErrors, got %v", err)
	}
	want := []string{"apps[0].path", "apps[0].health.type", "apps[0].health.path", "apps[0].health.interval",
		"apps[0].desired_state", "apps[0].failure_threshold", "apps[1].path"}
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
		if e.Line == 0 {
			t.Errorf("%s: no line", e.Field)
		}
	}
	for _, f := range want {
		if !got[f] {
			t.Errorf("no error for %s in:\n%v", f, err)
		}
	}
}

// TestHomeSettingsConfigErrors: bad per-home settings in the config file
// are reported with the file, the line and the field.
func TestHomeSettingsConfigErrors(t *testing.T) {
	text := `homes:
  - id: a
    command: [""]
    env: [NOEQUALS]
    working_dir: relative
    ready_timeout: -1s
    probe:
      kind: http
      path: health
      statuses: [700]
      settle: -1s
  - id: b
    provider: static
    options: {endpoint: "ftp://x"}
  - id: c
    options: {zone: a}
  - id: d
    probe: {kind: smoke}
`
	_, err := all.Load("h.yaml", []byte(text))
	if err == nil {
		t.Fatal("a config with bad home settings loaded")
	}
	for _, want := range []string{
		"h.yaml:3: homes[0].command: must name a program",
		"h.yaml:4: homes[0].env[0]: want KEY=VALUE",
		"h.yaml:5: homes[0].working_dir: want an absolute path",
		"h.yaml:6: homes[0].ready_timeout: must not be negative",
		"h.yaml:9: homes[0].probe.path: must start with /",
		"h.yaml:10: homes[0].probe.statuses[0]: want an HTTP status",
		"h.yaml:11: homes[0].probe.settle: must not be negative",
		"h.yaml:14: homes[1].options.endpoint: a static home needs an http or https URL",
		"h.yaml:16: homes[2].options: provider exec takes only options.user",
		"h.yaml:18: homes[3].probe: want auto, ws, http or tcp",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// The access and limits sections are checked at load, with the field.
func TestAccessConfigChecked(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{"access:\n  policies:\n    - {name: p, type: deny}\n", "access.default"},
		{"access:\n  default: nope\n", "access.default"},
		{"access:\n  default: p\n  policies:\n    - {name: p, type: jwt, jwt: {secret: short}}\n", "access.policies[0].jwt.secret"},
		{"access:\n  policies:\n    - {name: p, type: deny, bogus: 1}\n  default: p\n", "access.policies[0].bogus"},
		{"limits:\n  client_rate: -1\n", "limits.client_rate"},
	} {
		_, err := all.Load("c.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%q: error %v; want one naming %s", c.yaml, err, c.field)
		}
	}
}

// TestTLSConfigChecks refuses TLS settings that cannot work, naming the
// field.
func TestTLSConfigChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, field string }{
		{"tls:\n  mode: on_demand\n", "tls.mode"},
		{"tls:\n  mode: acme\n", "tls.names"},
		{"tls:\n  mode: files\n", "tls.cert_file"},
		{"tls:\n  mode: sometimes\n", "tls.mode"},
		{"tls:\n  mode: acme\n  names: [\"*.bad\"]\n", "tls.names[0]: \"*.bad\": wildcard names are not issued"},
		{"tls:\n  mode: internal\n  names: [\"a b\"]\n", "tls.names[0]: want a host name"},
		{"tls:\n  mode: acme\n  names: [a.test]\n  challenges: [dns-01]\n", "tls.challenges[0]"},
		{"tls:\n  mode: acme\n  names: [a.test]\n  eab: {key_id: k}\n", "tls.eab"},
		{"tls:\n  mode: acme\n  names: [a.test]\n  trusted_roots: [/nonexistent.pem]\n", "tls.trusted_roots[0]"},
		{"hosts:\n  apps_domain: 127.0.0.1\n", "hosts.apps_domain"},
		{"hosts:\n  apps_domain: x.test\n  nodes_domain: X.test\n", "hosts.nodes_domain"},
	} {
		_, err := all.Load("t.yaml", []byte(tc.yaml))
		want := tc.field // a field, or a field and the start of its message
		if !strings.Contains(want, ":") {
			want += ":"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error naming %s", tc.yaml, err, tc.field)
		}
	}
	cfg, err := all.Load("t.yaml", []byte("hosts:\n  apps_domain: apps.test\ntls:\n  mode: on_demand\n"))
	if err != nil {
		t.Fatalf("on_demand with a domain: %v", err)
	}
	if cfg.Listen != ":443" || cfg.TLS.HTTPListen != ":80" {
		t.Errorf("TLS on: listen %q, http_listen %q; want :443 and :80", cfg.Listen, cfg.TLS.HTTPListen)
	}
	cfg, err = all.Load("t.yaml", nil)
	if err != nil || cfg.Listen != "127.0.0.1:8080" || cfg.TLS.Mode != "off" || cfg.TLS.HTTPListen != "" {
		t.Errorf("default: %v, listen %q, tls %q", err, cfg.Listen, cfg.TLS.Mode)
	}
}

// TestProviderSectionErrors: a providers.NAME section is checked by its
// provider's rules, at its fields' lines; a home naming a provider whose
// section is missing says to add it.
func TestProviderSectionErrors(t *testing.T) {
	text := `providers:
  sect:
    url: ""
  exec:
    command: [x]
homes:
  - id: a
    provider: needy
`
	_, err := config.Load("p.yaml", []byte(text), all.With(func(r *provider.Registry) {
		r.MustRegister("sect", provider.Factory{NeedsSection: true,
			New: func(provider.Env, provider.Section) (provider.Provider, error) { return &provider.Static{}, nil },
			CheckSection: func(sec provider.Section) []provider.Problem {
				var c struct {
					URL string `yaml:"url"`
				}
				if err := sec.Decode(&c); err != nil || c.URL == "" {
					return []provider.Problem{provider.Problemf("url", "required")}
				}
				return nil
			}})
		r.MustRegister("needy", provider.Factory{NeedsSection: true,
			New: func(provider.Env, provider.Section) (provider.Provider, error) { return &provider.Static{}, nil }})
	}))
	want := []string{
		"p.yaml:3: providers.sect.url: required",
		"p.yaml:4: providers.exec: the exec provider is configured in exec, not here",
		"p.yaml:8: homes[0].provider: provider \"needy\" is not configured: add its section providers.needy",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("config error %v\nwant it to contain %q", err, w)
		}
	}
}
