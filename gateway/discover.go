package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/docker"
	"github.com/wakegate/wakegate/provider/kubernetes"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/route"
)

// startDiscovery runs the discovery of the providers that have it on
// (providers.docker.discover: labelled containers;
// providers.kubernetes.discover: annotated Deployments) in wg until ctx
// ends. The homes they find are registered as the admin API registers
// homes.
func (g *Gateway) startDiscovery(ctx context.Context, wg *sync.WaitGroup) {
	d := discovered{g: g, api: g.adminBackend()}
	if p, ok := g.providers[docker.Name].(*docker.Provider); ok && p.Discovers() {
		run := p.Discovery(dockerDiscovered{d})
		wg.Go(func() { run.Run(ctx) })
	}
	if p, ok := g.providers[kubernetes.Name].(*kubernetes.Provider); ok && p.Discovers() {
		run := p.Discovery(kubeDiscovered{d})
		wg.Go(func() { run.Run(ctx) })
	}
}

// discovered is g's home table as a provider's discovery changes it.
type discovered struct {
	g   *Gateway
	api *adminapi.Backend[*route.Home]
}

// put registers home id of provider prov with options opts, unless a
// home of the config or one that is not the same object (same reports
// whether a home's options name it) holds its id: the config wins. what
// names the object for the error.
func (d discovered) put(ctx context.Context, id, what, prov string, opts any, same func(json.RawMessage) bool,
	l provider.Labelled) error {
	if slices.Contains(d.g.reg.ConfigHomeIDs(), id) {
		return fmt.Errorf("the config declares a home %s, and the config wins", id)
	}
	if h, ok := d.g.homeWithID(id); ok {
		s := h.Spec()
		if s.Provider != prov || !same(s.Settings.Options) {
			return fmt.Errorf("home %s exists and is not %s's", id, what)
		}
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	req := admin.HomeRequest{Target: l.Target, Provider: prov, Options: b, Probe: registry.HomeProbe{Kind: l.Probe}}
	if l.IdleTimeout != "" {
		req.IdleTimeout = &l.IdleTimeout
	}
	_, _, err = d.api.PutHome(ctx, id, req, 0)
	return err
}

// Remove removes home id; one that is not there is removed already.
func (d discovered) Remove(ctx context.Context, id string) error {
	if _, ok := d.g.homeWithID(id); !ok {
		return nil
	}
	return d.api.DeleteHome(ctx, id, 0)
}

// dockerDiscovered is g's home table as docker discovery changes it.
type dockerDiscovered struct{ discovered }

// Put registers f's home.
func (d dockerDiscovered) Put(ctx context.Context, f docker.Found) error {
	return d.put(ctx, f.ID, "container "+f.Container, docker.Name, docker.HomeOptions{Container: f.Container, Port: f.Port, Members: f.Members},
		func(raw json.RawMessage) bool {
			var o docker.HomeOptions
			return provider.DecodeOptions(raw, &o) == nil && o.Container == f.Container
		}, provider.Labelled{Target: f.Target, Probe: f.Probe, IdleTimeout: f.IdleTimeout})
}

// kubeDiscovered is g's home table as kubernetes discovery changes it.
type kubeDiscovered struct{ discovered }

// Put registers f's home.
func (d kubeDiscovered) Put(ctx context.Context, f kubernetes.Found) error {
	return d.put(ctx, f.ID, "deployment "+f.Options.Namespace+"/"+f.Options.Name, kubernetes.Name, f.Options,
		func(raw json.RawMessage) bool {
			var o kubernetes.HomeOptions
			return provider.DecodeOptions(raw, &o) == nil && o.Name == f.Options.Name &&
				(o.Namespace == "" || o.Namespace == f.Options.Namespace)
		}, f.Labelled)
}
