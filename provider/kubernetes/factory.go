package kubernetes

import (
	"errors"
	"maps"
	"slices"
	"sort"

	"github.com/wakegate/wakegate/provider"
)

// Factory is the kubernetes provider's registry entry. Its section is
// providers.kubernetes (a Config, possibly empty: in-cluster); a home
// names provider: kubernetes and sets HomeOptions; it takes no command,
// env or working directory (the workload's own are used).
func Factory() provider.Factory {
	return provider.Factory{
		NeedsSection: true,
		CheckSection: func(sec provider.Section) []provider.Problem {
			ps := provider.UnknownFields[Config](sec)
			if len(ps) == 1 && ps[0].Field == "" {
				return ps
			}
			var c Config
			if err := sec.Decode(&c); err != nil {
				return append(ps, provider.Problemf("", "%v", err))
			}
			if c.Context != "" && c.Kubeconfig == "" {
				ps = append(ps, provider.Problemf("context", "a context is one of a kubeconfig's: set kubeconfig too"))
			}
			if c.Namespace != "" && !dnsName.MatchString(c.Namespace) {
				ps = append(ps, provider.Problemf("namespace", "not a namespace name: %q", c.Namespace))
			}
			if c.StopTimeout < 0 {
				ps = append(ps, provider.Problemf("stop_timeout", "must not be negative"))
			}
			return ps
		},
		CheckHome: checkHome,
		New: func(env provider.Env, sec provider.Section) (provider.Provider, error) {
			var c Config
			if sec != nil {
				if err := sec.Decode(&c); err != nil {
					return nil, err
				}
			}
			return New(c, env.Log)
		},
	}
}

func checkHome(s provider.Settings) []provider.Problem {
	var ps []provider.Problem
	if len(s.Command) > 0 || len(s.Env) > 0 || s.Dir != "" {
		ps = append(ps, provider.Problemf("command", "a kubernetes home runs its workload's containers: "+
			"set command, env and working directory in the pod template"))
	}
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return append(ps, provider.Problemf("options", "%v", err))
	}
	m := o.Check()
	fields := slices.Collect(maps.Keys(m))
	sort.Strings(fields)
	for _, f := range fields {
		ps = append(ps, provider.Problem{Field: "options." + f, Msg: m[f]})
	}
	return ps
}
