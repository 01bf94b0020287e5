package fly

import (
	"errors"

	"github.com/wakegate/wakegate/provider"
)

// Factory is the fly provider's registry entry. Its section is
// providers.fly (a Config); a home names provider: fly and gives its
// machine in its options (HomeOptions). A fly home runs its machine's
// image: it takes no command, env or working directory.
func Factory() provider.Factory {
	return provider.Factory{
		NeedsSection: true,
		CheckSection: func(sec provider.Section) []provider.Problem {
			c, err := decodeSection(sec)
			if err != nil {
				return []provider.Problem{provider.Problemf("", "%v", err)}
			}
			return problems("", c.Validate())
		},
		CheckHome: checkHome,
		New: func(env provider.Env, sec provider.Section) (provider.Provider, error) {
			c, err := decodeSection(sec)
			if err != nil {
				return nil, err
			}
			return New(c, Options{Log: env.Log})
		},
	}
}

// decodeSection decodes and defaults providers.fly.
func decodeSection(sec provider.Section) (Config, error) {
	return provider.DecodeSection[Config](sec, "fly", "app, token")
}

func checkHome(s provider.Settings) []provider.Problem {
	var ps []provider.Problem
	if len(s.Command) > 0 || len(s.Env) > 0 || s.Dir != "" {
		ps = append(ps, provider.Problemf("command", "a fly home runs its machine's image: it takes no command, env or working_dir"))
	}
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // DecodeOptions names the field already
		}
		return append(ps, provider.Problemf("options", "%v", err))
	}
	return append(ps, problems("options.", o.Validate())...)
}

func problems(prefix string, fe []*FieldError) []provider.Problem {
	var ps []provider.Problem
	for _, e := range fe {
		ps = append(ps, provider.Problem{Field: prefix + e.Field, Msg: e.Msg})
	}
	return ps
}
