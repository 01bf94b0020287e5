package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider"
)

// providers is the set of providers a gateway built, by name.
type providers map[string]provider.Provider

// builder is a provider table that builds the providers it checks
// (provider.Registry).
type builder interface {
	Build(name string, env provider.Env, sec provider.Section) (provider.Provider, error)
}

// buildProviders builds every available provider of cfg's provider table,
// with dataDir (absolute), onChange and mayRestart for their Env. On
// error, what was built is closed.
func buildProviders(cfg *config.Config, dataDir string, log *slog.Logger, onChange func(string, provider.Result),
	mayRestart func(string) bool) (providers, error) {
	reg, ok := cfg.ProviderTable().(builder)
	if !ok {
		return nil, fmt.Errorf("the providers of %s cannot be built: its provider table builds none", cfg.File())
	}
	out := providers{}
	for _, name := range cfg.AvailableProviders() {
		var sec provider.Section
		if n, ok := cfg.Providers[name]; ok {
			sec = &n
		}
		p, err := reg.Build(name, provider.Env{DataDir: dataDir, Log: log.With("provider", name), OnChange: onChange,
			MayRestart: mayRestart}, sec)
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
