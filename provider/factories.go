package provider

import "net/url"

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
