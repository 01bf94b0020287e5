package provider

import (
	"net/url"
	"path/filepath"
)

// ExecFactory is the exec provider's Factory: cfg is the exec section,
// with DataDir and OnChange taken from the gateway's Env. A home may set
// its own command (the placeholders of cfg.Command), env, an absolute
// working directory and ExecOptions ({"user": NAME, "memory_max": ...}).
func ExecFactory(cfg ExecConfig) Factory {
	return Factory{
		New: func(env Env, _ Section) (Provider, error) {
			c := cfg
			c.DataDir, c.OnChange = env.DataDir, env.OnChange
			return NewExec(c, env.Log)
		},
		CheckHome: func(s Settings) []Problem {
			var ps []Problem
			if s.Dir != "" && !filepath.IsAbs(s.Dir) {
				ps = append(ps, Problemf("working_dir", "want an absolute path, got %q", s.Dir))
			}
			var o ExecOptions
			if err := DecodeOptions(s.Options, &o); err != nil {
				ps = append(ps, Problemf("options", "provider exec takes only options.user, options.socket_activation, "+
					"options.memory_max and options.cpu_max: %v", err))
			} else {
				if o.User != "" {
					if _, _, err := lookupHomeUser(o.User); err != nil {
						ps = append(ps, Problemf("options.user", "%v", err))
					}
				}
				ps = append(ps, checkLimits(cfg, o)...)
			}
			return ps
		},
	}
}

// StaticOptions are a static home's options.
type StaticOptions struct {
	// Endpoint is the home's base URL, http or https. Required.
	Endpoint string `json:"endpoint"`
}

// StaticFactory is the static provider's Factory: a home names its fixed
// endpoint in its options ({"endpoint": "http://..."}) and sets no
// command, env or dir.
func StaticFactory() Factory {
	return Factory{
		New: func(Env, Section) (Provider, error) { return &Static{}, nil },
		CheckHome: func(s Settings) []Problem {
			var ps []Problem
			if len(s.Command) > 0 || len(s.Env) > 0 || s.Dir != "" {
				ps = append(ps, Problemf("command", "a static home runs nothing: it takes no command, env or working_dir"))
			}
			var o StaticOptions
			if err := DecodeOptions(s.Options, &o); err != nil {
				return append(ps, Problemf("options", "%v", err))
			}
			u, err := url.Parse(o.Endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ps = append(ps, Problemf("options.endpoint", "a static home needs an http or https URL, got %q", o.Endpoint))
			}
			return ps
		},
	}
}
