package execprov

import (
	"path/filepath"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
	"github.com/wakegate/wakegate/provider/exec/members"
)

// Factory is the exec provider's provider.Factory: cfg is the exec section,
// with DataDir and OnChange taken from the gateway's Env. A home may set
// its own command (the placeholders of cfg.Command), env, an absolute
// working directory and HomeOptions ({"user": NAME, "memory_max": ...}).
func Factory(cfg Config) provider.Factory {
	return provider.Factory{
		New: func(env provider.Env, _ provider.Section) (provider.Provider, error) {
			c := cfg
			c.DataDir, c.OnChange, c.MayRestart = env.DataDir, env.OnChange, env.MayRestart
			return New(c, env.Log)
		},
		CheckHome: func(s provider.Settings) []provider.Problem {
			var ps []provider.Problem
			if s.Dir != "" && !filepath.IsAbs(s.Dir) {
				ps = append(ps, provider.Problemf("working_dir", "want an absolute path, got %q", s.Dir))
			}
			var o HomeOptions
			if err := provider.DecodeOptions(s.Options, &o); err != nil {
				ps = append(ps, provider.Problemf("options", "provider exec takes only options.user, options.socket_activation, "+
					"options.memory_max, options.cpu_max, options.pids_max and options.members: %v", err))
			} else {
				if o.User != "" {
					if _, _, err := homeuser.Lookup(o.User); err != nil {
						ps = append(ps, provider.Problemf("options.user", "%v", err))
					}
				}
				ps = append(ps, checkLimits(cfg, o)...)
				ps = append(ps, members.Check(s.Command, o.Members, UsesSocket)...)
			}
			return ps
		},
	}
}
