package gateway

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/fault"
)

// Reload reads the config file again and applies it in place (SIGHUP,
// `wakegate reload`, POST /admin/reload), in this order:
//
//  1. The file is loaded and checked like at start. A file that does not
//     pass changes nothing: the error names each problem by file, line and
//     field. Nor does a file that is empty, or that declares no home and no
//     app while the running config declares some, unless the caller
//     confirms it (removesEverything, DESIGN rule 30).
//  2. Settings that only a start applies (listeners, the store, TLS, the
//     engine's timeouts, ...) keep their running values; each that the
//     file changes is named in the answer and the log (restartOnly).
//  3. Apps the file no longer declares go; homes it adds or changes are
//     registered through the registrar, as at start (a changed home is
//     registered again and proves itself on its next request); homes it no
//     longer declares are stopped and removed, unless they still have
//     sessions or an app of the admin API (then they stay, and the answer
//     says why); apps it adds or changes are installed as candidates.
//  4. The access policies are rebuilt when they changed, and the request
//     path's settings (wake.hold, wake.wake_timeout, the no-wake rules,
//     the waiting page) take the file's values.
//
// Homes and apps the file leaves as they were are not touched: their
// connections, sessions and warm verdicts carry on. One reload runs at a
// time.

// conf is the config the gateway runs with now: the one it started with,
// or the one the last reload applied. Code that reads what a reload may
// change (homes, apps, wake timeouts, access) reads it through conf.
func (g *Gateway) conf() *config.Config {
	if c := g.live.Load(); c != nil {
		return c
	}
	return g.cfg
}

// SetReloadSource sets how a reload reads the config file: load reads and
// checks it (with the command line's overrides applied, so that they do
// not read as changes). Without it a reload is refused. Call it before
// Serve.
func (g *Gateway) SetReloadSource(load func() (*config.Config, error)) { g.reloadSrc = load }

// Reload reads the config file again and applies what changed (see the
// order above). It reports what it did.
func (g *Gateway) Reload(ctx context.Context, opts admin.ReloadOptions) (admin.Reload, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.reloadSrc == nil {
		return admin.Reload{}, fault.New(fault.Unavailable, "reload_unavailable",
			"this gateway runs a config that is not read from a file").
			WithHint("start it with `wakegate serve --config FILE` to reload FILE")
	}
	next, err := g.reloadSrc()
	if err != nil {
		return admin.Reload{}, fault.Wrap(fault.Invalid, "invalid_config",
			"the config file has problems; nothing was changed", err).
			WithHint("fix each problem at the file and line given, then reload again (wakegate check-config --config FILE checks a file)")
	}
	cur := g.conf()
	if !opts.AllowRemoveAll {
		if err := removesEverything(cur, next); err != nil {
			return admin.Reload{}, err
		}
	}
	res := admin.Reload{File: next.File()}
	res.NeedRestart = keepRestartOnly(cur, next)
	var set *access.Set
	if !reflect.DeepEqual(cur.Access, next.Access) {
		if set, err = g.newAccessSet(next); err != nil {
			return admin.Reload{}, fault.Wrap(fault.Invalid, "invalid_config",
				"the access policies cannot be built; nothing was changed", err)
		}
		res.Applied = append(res.Applied, "access")
	}
	res.Applied = append(res.Applied, changedFields(cur, next, reloadable)...)
	var ch control.ReloadChanges
	err = g.reg.Reload(ctx, cur, next, &ch)
	res.HomesAdded, res.HomesChanged, res.HomesRemoved, res.HomesKept = ch.HomesAdded, ch.HomesChanged, ch.HomesRemoved, ch.HomesKept
	res.AppsAdded, res.AppsChanged, res.AppsRemoved = ch.AppsAdded, ch.AppsChanged, ch.AppsRemoved
	if err != nil {
		// The homes and apps applied so far serve; the rest of the file
		// is not applied.
		if set != nil {
			set.Close()
		}
		g.log.Error("config reload stopped part way", "file", next.File(), "err", err, "done", fmt.Sprintf("%+v", res))
		return res, fmt.Errorf("reload %s: %w", next.File(), err)
	}
	if set != nil {
		g.gate.SwapSet(set).Close()
	}
	g.live.Store(next)
	g.path.SetSettings(routeSettings(next))
	// The idle checks follow the homes' idle timeouts (gateway.go).
	g.engine.SetIdleTick(idleTick(next))
	for _, l := range [][]string{res.HomesAdded, res.HomesChanged, res.HomesRemoved, res.HomesKept,
		res.AppsAdded, res.AppsChanged, res.AppsRemoved, res.Applied, res.NeedRestart} {
		sort.Strings(l)
	}
	g.logReload(res)
	return res, nil
}

// removesEverything refuses next, the file a reload read, when it is
// empty or declares no home and no app while cur, the running config,
// declares some: such a file is far more often one truncated or
// overwritten by accident than a wish to stop everything, and applying it
// stops every home at once. The error counts what would go, names it for
// operators, and says how to confirm.
func removesEverything(cur, next *config.Config) error {
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

// logReload writes the one line of a reload.
func (g *Gateway) logReload(res admin.Reload) {
	attrs := []any{"file", res.File}
	for _, f := range []struct {
		k string
		v []string
	}{{"homes_added", res.HomesAdded}, {"homes_changed", res.HomesChanged}, {"homes_removed", res.HomesRemoved},
		{"apps_added", res.AppsAdded}, {"apps_changed", res.AppsChanged}, {"apps_removed", res.AppsRemoved},
		{"applied", res.Applied}} {
		if len(f.v) > 0 {
			attrs = append(attrs, f.k, strings.Join(f.v, ","))
		}
	}
	g.log.Info("config reloaded", attrs...)
	if len(res.HomesKept) > 0 {
		g.log.Warn("config reload: homes the file no longer declares are kept for now", "homes", strings.Join(res.HomesKept, "; "),
			"hint", "reload again once they are idle, or remove them with DELETE /admin/homes/{id}")
	}
	if len(res.NeedRestart) > 0 {
		g.log.Warn("config reload: settings that apply only at the next start were not applied", "fields", strings.Join(res.NeedRestart, ","),
			"hint", "restart the gateway to apply them; it runs with the values it started with until then")
	}
}

// newAccessSet builds the access policies of cfg, as newGate does.
func (g *Gateway) newAccessSet(cfg *config.Config) (*access.Set, error) {
	log := g.log.With("component", "access")
	return access.NewSet(cfg.Access, g.gate.IP().Of, func(err error) { log.Warn("access policy", "err", err) })
}

// A config field a reload treats in one of two ways: reloadable fields
// take the file's value, restart-only fields keep the running one.
type configField struct {
	name string
	get  func(c *config.Config) any
	// pin copies the running value (from) into the loaded config (to).
	pin func(to, from *config.Config)
}

// reloadable are the settings outside homes, apps and access that a reload
// applies; the request path reads them through conf.
var reloadable = []configField{
	{name: "wake.hold", get: func(c *config.Config) any { return *c.Wake.Hold }},
	{name: "wake.wake_timeout", get: func(c *config.Config) any { return c.Wake.WakeTimeout }},
	{name: "wake.idle_timeout", get: func(c *config.Config) any { return *c.Wake.IdleTimeout }},
	{name: "wake.no_wake_user_agents", get: func(c *config.Config) any { return c.Wake.NoWakeUserAgents }},
	{name: "wake.no_wake_paths", get: func(c *config.Config) any { return c.Wake.NoWakePaths }},
	{name: "wake.probe.kind", get: func(c *config.Config) any { return c.Wake.Probe.Kind }},
	{name: "wake.waiting_page", get: func(c *config.Config) any { return c.Wake.WaitingPage }},
}

// restartOnly are the settings a running gateway cannot change: its
// listeners, store, providers, engine, TLS, logging and limiter tables.
var restartOnly = []configField{
	{"listen", func(c *config.Config) any { return c.Listen }, func(t, f *config.Config) { t.Listen = f.Listen }},
	{"data_dir", func(c *config.Config) any { return c.DataDir }, func(t, f *config.Config) { t.DataDir = f.DataDir }},
	{"instance", func(c *config.Config) any { return c.Instance }, func(t, f *config.Config) { t.Instance = f.Instance }},
	{"log", func(c *config.Config) any { return c.Log }, func(t, f *config.Config) { t.Log = f.Log }},
	{"server", func(c *config.Config) any { return c.Server }, func(t, f *config.Config) { t.Server = f.Server }},
	{"proxy", func(c *config.Config) any { return c.Proxy }, func(t, f *config.Config) { t.Proxy = f.Proxy }},
	{"exec", func(c *config.Config) any { return c.Exec }, func(t, f *config.Config) { t.Exec = f.Exec }},
	{"providers", func(c *config.Config) any { return providerSections(c) }, func(t, f *config.Config) { t.Providers = f.Providers }},
	{"admin", func(c *config.Config) any { return c.Admin }, func(t, f *config.Config) { t.Admin = f.Admin }},
	{"roll", func(c *config.Config) any { return c.Roll }, func(t, f *config.Config) { t.Roll = f.Roll }},
	{"tls", func(c *config.Config) any { return c.TLS }, func(t, f *config.Config) { t.TLS = f.TLS }},
	{"hosts", func(c *config.Config) any { return c.Hosts }, func(t, f *config.Config) { t.Hosts = f.Hosts }},
	{"redis", func(c *config.Config) any { return c.Redis }, func(t, f *config.Config) { t.Redis = f.Redis }},
	{"limits", func(c *config.Config) any { return c.Limits }, func(t, f *config.Config) { t.Limits = f.Limits }},
	{"access.client_ip_header", func(c *config.Config) any { return c.Access.ClientIPHeader },
		func(t, f *config.Config) { t.Access.ClientIPHeader = f.Access.ClientIPHeader }},
	{"wake.warm_ttl", func(c *config.Config) any { return c.Wake.WarmTTL }, func(t, f *config.Config) { t.Wake.WarmTTL = f.Wake.WarmTTL }},
	{"wake.ready_timeout", func(c *config.Config) any { return c.Wake.ReadyTimeout },
		func(t, f *config.Config) { t.Wake.ReadyTimeout = f.Wake.ReadyTimeout }},
	{"wake.retry_after", func(c *config.Config) any { return c.Wake.RetryAfter },
		func(t, f *config.Config) { t.Wake.RetryAfter = f.Wake.RetryAfter }},
	{"wake.max_concurrent", func(c *config.Config) any { return c.Wake.MaxConcurrent },
		func(t, f *config.Config) { t.Wake.MaxConcurrent = f.Wake.MaxConcurrent }},
	{"wake.failure_backoff", func(c *config.Config) any { return c.Wake.FailureBackoff },
		func(t, f *config.Config) { t.Wake.FailureBackoff = f.Wake.FailureBackoff }},
	{"wake.failure_backoff_max", func(c *config.Config) any { return c.Wake.FailureBackoffMax },
		func(t, f *config.Config) { t.Wake.FailureBackoffMax = f.Wake.FailureBackoffMax }},
	{"wake.probe", func(c *config.Config) any { p := c.Wake.Probe; p.Kind = ""; return p }, func(t, f *config.Config) {
		kind := t.Wake.Probe.Kind
		t.Wake.Probe = f.Wake.Probe
		t.Wake.Probe.Kind = kind
	}},
}

// providerSections are the providers' config sections as text: a section
// that moved to other lines of the file is the same section.
func providerSections(c *config.Config) map[string]string {
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

// keepRestartOnly gives next the running value (cur's) of every
// restart-only setting and returns those whose value in next differed.
func keepRestartOnly(cur, next *config.Config) []string {
	changed := changedFields(cur, next, restartOnly)
	for _, f := range restartOnly {
		f.pin(next, cur)
	}
	return changed
}

// changedFields returns the names of fields whose values differ between a
// and b.
func changedFields(a, b *config.Config, fields []configField) []string {
	var out []string
	for _, f := range fields {
		if !reflect.DeepEqual(f.get(a), f.get(b)) {
			out = append(out, f.name)
		}
	}
	return out
}
