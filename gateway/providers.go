package gateway

import (
	"context"
	"log/slog"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/httpprov"
)

// providerRegistry is every provider this gateway can build, by name: the
// one list to extend when a provider is added (see the provider package's
// doc, "Adding a provider"). It reads cfg's sections (exec) but builds
// nothing, so config validation uses it too.
func providerRegistry(cfg *Config) *provider.Registry {
	r := provider.NewRegistry()
	e := cfg.Exec
	r.MustRegister("exec", provider.ExecFactory(provider.ExecConfig{
		Command: e.Command, Env: e.Env, LogMaxBytes: int64(e.LogMaxBytes), StopGrace: e.StopGrace,
		RestartBudget: e.RestartBudget, RestartWindow: e.RestartWindow,
		VersionCommand: e.VersionCommand, SuspendSignal: e.SuspendSignal,
		InheritEnv: e.InheritEnv, Containment: provider.Containment(e.Containment), SocketActivation: e.SocketActivation, Users: provider.ExecUsers{Mode: e.Users.Mode, First: e.Users.first, Last: e.Users.last},
	}))
	r.MustRegister("static", provider.StaticFactory())
	r.MustRegister("http", httpprov.Factory())
	r.MustRegister(fly.Name, fly.Factory())
	r.MustRegister(docker.Name, docker.Factory())
	if cfg.moreProviders != nil {
		cfg.moreProviders(r)
	}
	return r
}

// builtinSections are the providers configured in a section of their own
// at the top level rather than under providers.
var builtinSections = map[string]string{"exec": "exec", "static": "homes[].endpoint"}

// availableProviders are the names a home may use: those that need no
// section, and those whose section providers.NAME is configured.
func (c *Config) availableProviders(reg *provider.Registry) []string {
	return reg.Available(func(name string) bool { _, ok := c.Providers[name]; return ok })
}

// providers is the set of providers a gateway built, by name.
type providers map[string]provider.Provider

// buildProviders builds every available provider of cfg's registry, with
// dataDir (absolute) and onChange for their Env. On error, what was built
// is closed.
func buildProviders(cfg *Config, dataDir string, log *slog.Logger, onChange func(string, provider.Result)) (providers, error) {
	reg := providerRegistry(cfg)
	out := providers{}
	for _, name := range cfg.availableProviders(reg) {
		var sec provider.Section
		if n, ok := cfg.Providers[name]; ok {
			sec = &n
		}
		p, err := reg.Build(name, provider.Env{DataDir: dataDir, Log: log.With("provider", name), OnChange: onChange}, sec)
		if err != nil {
			out.close(log)
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}

// names returns the built providers' names, sorted.
func (ps providers) names() []string {
	out := make([]string, 0, len(ps))
	for n := range ps {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// close closes every provider that holds something (provider.Closer).
func (ps providers) close(log *slog.Logger) {
	for _, n := range ps.names() {
		if c, ok := ps[n].(provider.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("close provider", "provider", n, "err", err)
			}
		}
	}
}

// quiesce stops the local homes of every provider that stops homes at
// shutdown (provider.Quiescer); homesOf lists a provider's homes. It
// returns the results of all of them.
func (ps providers) quiesce(ctx context.Context, homesOf func(name string) []string) []provider.Quiesced {
	var out []provider.Quiesced
	for _, n := range ps.names() {
		if q, ok := ps[n].(provider.Quiescer); ok {
			out = append(out, q.Quiesce(ctx, homesOf(n))...)
		}
	}
	return out
}

// checkProviderSections checks every providers.NAME section with its
// provider's rules, reporting each problem at its field's line.
func (c *Config) checkProviderSections(k checker, reg *provider.Registry) {
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	pk := k.in("providers")
	for _, n := range names {
		if where, ok := builtinSections[n]; ok {
			pk.bad(n, "the %s provider is configured in %s, not here", n, where)
			continue
		}
		node := c.Providers[n]
		for _, p := range reg.CheckSection(n, &node) {
			pk.in(n).bad(p.Field, "%s", p.Msg)
		}
	}
}

var _ provider.Section = (*yaml.Node)(nil)
