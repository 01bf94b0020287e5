// Package all is the table of every provider a gateway can run, for
// config.Load and for the gateway that builds them: exec (from the config's
// section exec), static, http, fly, docker and kubernetes. It is the one list to
// extend when a provider is added (see the provider package's doc,
// "Adding a provider"). The config imports no provider; the assembly (the
// CLI) and the tests load a config through Load or hand config.Load
// Providers.
package all

import (
	"fmt"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/httpprov"
	"github.com/wakegate/wakegate/provider/kubernetes"
)

// Load is config.Load with the standard providers.
func Load(name string, data []byte) (*config.Config, error) {
	return config.Load(name, data, Providers())
}

// LoadFile is config.LoadFile with the standard providers.
func LoadFile(path string) (*config.Config, error) {
	return config.LoadFile(path, Providers())
}

// Providers are the standard providers, for config.Load.
func Providers() config.Providers { return With(nil) }

// With is Providers and the providers more registers beside them (tests:
// a small real provider of their own), for the checks and for the gateway
// that builds them.
func With(more func(*provider.Registry)) config.Providers {
	return config.Providers{Exec: execRules(), Table: func(c *config.Config) config.ProviderTable {
		r := Registry(c)
		if more != nil {
			more(r)
		}
		return r
	}}
}

// Registry is every standard provider of c by name; it reads c's sections
// (exec) but builds nothing.
func Registry(c *config.Config) *provider.Registry {
	r := provider.NewRegistry()
	e := c.Exec
	first, last := e.Users.UIDs()
	r.MustRegister("exec", execprov.Factory(execprov.Config{
		Command: e.Command, Env: e.Env, LogMaxBytes: int64(e.LogMaxBytes), StopGrace: e.StopGrace,
		RestartBudget: e.RestartBudget, RestartWindow: e.RestartWindow, RestartPause: e.RestartPause,
		VersionCommand: e.VersionCommand, SuspendSignal: e.SuspendSignal,
		InheritEnv: e.InheritEnv, Containment: execprov.Containment(e.Containment), SocketActivation: e.SocketActivation,
		Users:      execprov.Users{Mode: e.Users.Mode, First: first, Last: last},
		MachineDir: e.Users.MachineDir, PidsMax: e.PidsMax,
	}))
	r.MustRegister("static", provider.StaticFactory())
	r.MustRegister("http", httpprov.Factory())
	r.MustRegister(fly.Name, fly.Factory())
	r.MustRegister(docker.Name, docker.Factory())
	r.MustRegister(kubernetes.Name, kubernetes.Factory())
	return r
}

// execRules are the exec provider's part in the config's section exec.
func execRules() config.ExecRules {
	return config.ExecRules{
		Containments: []string{string(execprov.ContainAuto), string(execprov.ContainCgroup), string(execprov.ContainSubreaper)},
		UserModes:    []string{execprov.UsersAuto, execprov.UsersDynamic, execprov.UsersOff},
		UsersOff:     execprov.UsersOff,
		UserRange:    fmt.Sprintf("%d-%d", execprov.DefaultUsersFirst, execprov.DefaultUsersLast),
		PidsMax:      execprov.DefaultPidsMax,
		UsesSocket:   execprov.UsesSocket, SocketPath: execprov.SocketPathOf,
		ListensWhereLooked: execprov.ListensWhereLooked, ClosedToOthers: execprov.ClosedToOthers,
	}
}

var _ config.ProviderTable = (*provider.Registry)(nil)
