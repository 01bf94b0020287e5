package config

import (
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/internal/provconf"
)

// Providers is what the config's checks ask of the providers a gateway
// can run. The config imports no provider: whoever loads a config hands
// Load the table (package provider/all has the standard one, the one list
// to extend when a provider is added), and the config keeps the table of
// its own sections for whoever builds the providers (ProviderTable).
type Providers struct {
	// Exec is the exec provider's part in the section exec and in the
	// checks and warnings of exec homes.
	Exec ExecRules
	// Table is the table of c's providers, built from c's sections (the
	// exec provider reads the section exec, defaulted and checked). It
	// builds nothing, so the checks of a config use it too.
	Table func(c *Config) ProviderTable
}

// ProviderTable is every provider a home may name, by name, and their
// checks (provider.Registry is one).
type ProviderTable interface {
	// Available returns the names a home may use, given which sections
	// providers.NAME are configured.
	Available(configured func(name string) bool) []string
	// CheckSection checks the section providers.NAME, naming fields
	// relative to it.
	CheckSection(name string, sec provconf.Section) []provconf.Problem
	// CheckHome checks a home's provider name and settings; available
	// is what Available returned.
	CheckHome(name string, available []string, s provconf.Settings) []provconf.Problem
}

// ExecRules are the exec provider's values and rules that the section
// exec and the exec homes of a config are defaulted, checked and warned
// by.
type ExecRules struct {
	// Containments are exec.containment's values, its default first.
	Containments []string
	// UserModes are exec.users.mode's values, its default first, and
	// UsersOff the one that runs homes as the gateway's own user.
	UserModes []string
	UsersOff  string
	// UserRange is exec.users.range's default, "FIRST-LAST".
	UserRange string
	// PidsMax is exec.pids_max's default.
	PidsMax int
	// UsesSocket reports whether a command template names {socket}.
	UsesSocket func(cmd []string) bool
	// SocketPath is where exec home id's socket is under dataDir, and an
	// error for operators when that path is too long for a Unix socket.
	SocketPath func(dataDir, id string) (string, error)
	// ListensWhereLooked reports whether a home started from a command
	// template can learn where the gateway will look for it.
	ListensWhereLooked func(cmd []string) bool
	// ClosedToOthers returns what on the way to path (its folders, and
	// path itself when it is a program) another user cannot pass or run;
	// "" when nothing.
	ClosedToOthers func(path string, program bool) string
}

// ProviderTable is the table this config was checked against, built from
// its sections: the providers the gateway builds and the admin API's
// homes are checked by.
func (c *Config) ProviderTable() ProviderTable { return c.table }

// builtinSections are the providers configured in a section of their own
// at the top level rather than under providers.
var builtinSections = map[string]string{"exec": "exec", "static": "homes[].endpoint"}

// AvailableProviders are the names a home may use: those that need no
// section, and those whose section providers.NAME is configured.
func (c *Config) AvailableProviders() []string {
	return c.table.Available(func(name string) bool { _, ok := c.Providers[name]; return ok })
}

// checkProviderSections checks every providers.NAME section with its
// provider's rules, reporting each problem at its field's line.
func (c *Config) checkProviderSections(k checker) {
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
		for _, p := range c.table.CheckSection(n, &node) {
			pk.in(n).bad(p.Field, "%s", p.Msg)
		}
	}
}

var _ provconf.Section = (*yaml.Node)(nil)
