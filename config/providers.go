package config

import (
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/httpprov"
)

// ProviderRegistry is every provider this gateway can build, by name: the
// one list to extend when a provider is added (see the provider package's
// doc, "Adding a provider"). It reads c's sections (exec) but builds
// nothing, so config validation uses it too.
func (c *Config) ProviderRegistry() *provider.Registry {
	r := provider.NewRegistry()
	e := c.Exec
	r.MustRegister("exec", execprov.Factory(execprov.Config{
		Command: e.Command, Env: e.Env, LogMaxBytes: int64(e.LogMaxBytes), StopGrace: e.StopGrace,
		RestartBudget: e.RestartBudget, RestartWindow: e.RestartWindow,
		VersionCommand: e.VersionCommand, SuspendSignal: e.SuspendSignal,
		InheritEnv: e.InheritEnv, Containment: execprov.Containment(e.Containment), SocketActivation: e.SocketActivation, Users: execprov.Users{Mode: e.Users.Mode, First: e.Users.first, Last: e.Users.last},
		MachineDir: e.Users.MachineDir, PidsMax: e.PidsMax,
	}))
	r.MustRegister("static", provider.StaticFactory())
	r.MustRegister("http", httpprov.Factory())
	r.MustRegister(fly.Name, fly.Factory())
	r.MustRegister(docker.Name, docker.Factory())
	if c.moreProviders != nil {
		c.moreProviders(r)
	}
	return r
}

// builtinSections are the providers configured in a section of their own
// at the top level rather than under providers.
var builtinSections = map[string]string{"exec": "exec", "static": "homes[].endpoint"}

// AvailableProviders are the names a home may use: those that need no
// section, and those whose section providers.NAME is configured.
func (c *Config) AvailableProviders(reg *provider.Registry) []string {
	return reg.Available(func(name string) bool { _, ok := c.Providers[name]; return ok })
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
