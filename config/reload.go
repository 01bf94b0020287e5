package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/fault"
)

// What differs between the running config and the one a reload read, and
// which of its fields a running gateway can change, are questions about the
// config's own fields: they live beside the types, so that a field added to
// Config is classified here (TestReloadClassifiesEverySection). The gateway
// keeps only the order in which a reload applies them (gateway/reload.go),
// and the control plane the homes and apps (control/reload.go).

// RemovesEverything refuses next, the file a reload read, when it is
// empty or declares no home and no app while cur, the running config,
// declares some: such a file is far more often one truncated or
// overwritten by accident than a wish to stop everything, and applying it
// stops every home at once. The error counts what would go, names it for
// operators, and says how to confirm.
func RemovesEverything(cur, next *Config) error {
	none := len(next.Homes) == 0 && len(next.Apps) == 0
	if !next.Empty() && (!none || len(cur.Homes)+len(cur.Apps) == 0) {
		return nil
	}
	homes := make([]string, 0, len(cur.Homes))
	for _, h := range cur.Homes {
		homes = append(homes, h.ID)
	}
	apps := make([]string, 0, len(cur.Apps))
	for _, a := range cur.Apps {
		apps = append(apps, a.Slug)
	}
	sort.Strings(homes)
	sort.Strings(apps)
	what, also := "declares no home and no app", ""
	if next.Empty() {
		what, also = "is empty", " and put the settings a reload applies (access, wake) back to their defaults"
	}
	msg := fmt.Sprintf("the config file %s: applying it would remove %s and %s%s; nothing was changed",
		what, counted(len(homes), "home"), counted(len(apps), "app"), also)
	cause := fmt.Errorf("%s %s; the running config declares homes [%s] and apps [%s]",
		next.File(), what, strings.Join(homes, ", "), strings.Join(apps, ", "))
	return fault.Wrap(fault.Conflict, "reload_removes_all", msg, cause).
		WithHint("if the file was emptied or overwritten by accident, restore it; if removing everything is meant, " +
			"apply it with `wakegate reload --allow-remove-all` (POST /admin/reload?allow_remove_all=true): " +
			"SIGHUP never applies such a file")
}

// counted is n things: "1 home", "2 homes".
func counted(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// A config field a reload treats in one of two ways: reloadable fields
// take the file's value, restart-only fields keep the running one.
type configField struct {
	name string
	get  func(c *Config) any
	// pin copies the running value (from) into the loaded config (to).
	pin func(to, from *Config)
}

// kept is a restart-only field read and pinned whole through at.
func kept[T any](name string, at func(c *Config) *T) configField {
	return configField{name: name, get: func(c *Config) any { return *at(c) }, pin: func(to, from *Config) { *at(to) = *at(from) }}
}

// reloadable are the settings outside homes, apps and access that a reload
// applies; the gateway hands them to the request path and the engine.
var reloadable = []configField{
	{name: "wake.hold", get: func(c *Config) any { return c.Wake.Hold }},
	{name: "wake.wake_timeout", get: func(c *Config) any { return c.Wake.WakeTimeout }},
	{name: "wake.idle_timeout", get: func(c *Config) any { return c.Wake.IdleTimeout }},
	{name: "wake.no_wake_user_agents", get: func(c *Config) any { return c.Wake.NoWakeUserAgents }},
	{name: "wake.no_wake_paths", get: func(c *Config) any { return c.Wake.NoWakePaths }},
	{name: "wake.probe.kind", get: func(c *Config) any { return c.Wake.Probe.Kind }},
	{name: "wake.waiting_page", get: func(c *Config) any { return c.Wake.WaitingPage }},
	{name: "wake.waiting_theme", get: func(c *Config) any { return c.Wake.WaitingTheme }},
	// Applied through the homes that inherit it, registered again.
	{name: "wake.schedule", get: func(c *Config) any { return c.Wake.Schedule }},
}

// restartOnly are the settings a running gateway cannot change: its
// listeners, store, providers, engine, TLS, logging and limiter tables.
var restartOnly = []configField{
	kept("listen", func(c *Config) *string { return &c.Listen }),
	kept("data_dir", func(c *Config) *string { return &c.DataDir }),
	kept("instance", func(c *Config) *string { return &c.Instance }),
	kept("public_url", func(c *Config) *string { return &c.PublicURL }),
	kept("log", func(c *Config) *LogConfig { return &c.Log }),
	kept("server", func(c *Config) *ServerConfig { return &c.Server }),
	kept("proxy", func(c *Config) *ProxyConfig { return &c.Proxy }),
	kept("exec", func(c *Config) *ExecConfig { return &c.Exec }),
	{"providers", func(c *Config) any { return providerSections(c) }, func(t, f *Config) { t.Providers = f.Providers }},
	kept("admin", func(c *Config) *AdminConfig { return &c.Admin }),
	kept("roll", func(c *Config) *RollConfig { return &c.Roll }),
	kept("tls", func(c *Config) *TLSConfig { return &c.TLS }),
	kept("hosts", func(c *Config) *HostsConfig { return &c.Hosts }),
	kept("redis", func(c *Config) *RedisConfig { return &c.Redis }),
	kept("webhooks", func(c *Config) *[]WebhookConfig { return &c.Webhooks }),
	kept("limits", func(c *Config) *access.LimitsConfig { return &c.Limits }),
	kept("access.client_ip_header", func(c *Config) *string { return &c.Access.ClientIPHeader }),
	kept("wake.warm_ttl", func(c *Config) *time.Duration { return &c.Wake.WarmTTL }),
	kept("wake.ready_timeout", func(c *Config) *time.Duration { return &c.Wake.ReadyTimeout }),
	kept("wake.retry_after", func(c *Config) *time.Duration { return &c.Wake.RetryAfter }),
	kept("wake.max_concurrent", func(c *Config) *int { return &c.Wake.MaxConcurrent }),
	kept("wake.failure_backoff", func(c *Config) *time.Duration { return &c.Wake.FailureBackoff }),
	kept("wake.failure_backoff_max", func(c *Config) *time.Duration { return &c.Wake.FailureBackoffMax }),
	{"wake.probe", func(c *Config) any { p := c.Wake.Probe; p.Kind = ""; return p }, func(t, f *Config) {
		kind := t.Wake.Probe.Kind
		t.Wake.Probe = f.Wake.Probe
		t.Wake.Probe.Kind = kind
	}},
}

// providerSections are the providers' config sections as text: a section
// that moved to other lines of the file is the same section.
func providerSections(c *Config) map[string]string {
	out := make(map[string]string, len(c.Providers))
	for name, n := range c.Providers {
		b, err := yaml.Marshal(&n)
		if err != nil {
			b = []byte(err.Error())
		}
		out[name] = string(b)
	}
	return out
}

// KeepRestartOnly gives next the running value (cur's) of every
// restart-only setting and returns those whose value in next differed.
func KeepRestartOnly(cur, next *Config) []string {
	changed := changedFields(cur, next, restartOnly)
	for _, f := range restartOnly {
		f.pin(next, cur)
	}
	return changed
}

// changedFields returns the names of fields whose values differ between a
// and b.
func changedFields(a, b *Config, fields []configField) []string {
	var out []string
	for _, f := range fields {
		if !reflect.DeepEqual(f.get(a), f.get(b)) {
			out = append(out, f.name)
		}
	}
	return out
}

// ReloadableChanges returns the names of the reloadable settings outside
// homes, apps and access whose values differ between cur and next.
func ReloadableChanges(cur, next *Config) []string { return changedFields(cur, next, reloadable) }
