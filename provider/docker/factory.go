package docker

import (
	"errors"
	"sort"

	"github.com/wakegate/wakegate/provider"
)

// Factory is the docker provider's registry entry. Its section is
// providers.docker (a Config); a home names provider: docker and may set
// HomeOptions, its own command (the container's CMD) and env; a working
// directory is the image's.
func Factory() provider.Factory {
	return provider.Factory{
		NeedsSection: true,
		CheckSection: func(sec provider.Section) []provider.Problem {
			ps := provider.UnknownFields[Config](sec)
			if len(ps) == 1 && ps[0].Field == "" {
				return ps
			}
			c, err := decodeSection(sec)
			if err != nil {
				return append(ps, provider.Problemf("", "%v", err))
			}
			return append(ps, problems("", c.Check())...)
		},
		CheckHome: checkHome,
		New: func(env provider.Env, sec provider.Section) (provider.Provider, error) {
			c, err := decodeSection(sec)
			if err != nil {
				return nil, err
			}
			return New(c, Options{Log: env.Log, DataDir: env.DataDir, OnChange: env.OnChange})
		},
	}
}

// decodeSection decodes and defaults providers.docker.
func decodeSection(sec provider.Section) (Config, error) {
	return provider.DecodeSection[Config](sec, "docker", "image, port")
}

func checkHome(s provider.Settings) []provider.Problem {
	var ps []provider.Problem
	if s.Dir != "" {
		ps = append(ps, provider.Problemf("working_dir", "a docker home runs in its image's working directory: set it in the image"))
	}
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // DecodeOptions names the field already
		}
		return append(ps, provider.Problemf("options", "%v", err))
	}
	return append(ps, problems("options.", o.Check())...)
}

// problems turns a field->message map into Problems, sorted by field.
func problems(prefix string, m map[string]string) []provider.Problem {
	fields := make([]string, 0, len(m))
	for f := range m {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	ps := make([]provider.Problem, 0, len(fields))
	for _, f := range fields {
		ps = append(ps, provider.Problem{Field: prefix + f, Msg: m[f]})
	}
	return ps
}
