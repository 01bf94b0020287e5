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
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/route"
)

// startDiscovery runs the docker provider's discovery of labelled
// containers (providers.docker.discover) in wg until ctx ends. The homes
// it finds are registered as the admin API registers homes.
func (g *Gateway) startDiscovery(ctx context.Context, wg *sync.WaitGroup) {
	p, ok := g.providers[docker.Name].(*docker.Provider)
	if !ok || !p.Discovers() {
		return
	}
	d := p.Discovery(discovered{g: g, api: g.adminBackend()})
	wg.Go(func() { d.Run(ctx) })
}

// discovered is g's home table as docker discovery changes it.
type discovered struct {
	g   *Gateway
	api *adminapi.Backend[*route.Home]
}

// Put registers f's home (a group's, with its members), unless a home of
// the config or one that is not f's container holds its id: the config
// wins.
func (d discovered) Put(ctx context.Context, f docker.Found) error {
	if slices.Contains(d.g.reg.ConfigHomeIDs(), f.ID) {
		return fmt.Errorf("the config declares a home %s, and the config wins", f.ID)
	}
	if h, ok := d.g.homeWithID(f.ID); ok {
		var o docker.HomeOptions
		s := h.Spec()
		if s.Provider != docker.Name || provider.DecodeOptions(s.Settings.Options, &o) != nil || o.Container != f.Container {
			return fmt.Errorf("home %s exists and is not container %s's", f.ID, f.Container)
		}
	}
	opts, err := json.Marshal(docker.HomeOptions{Container: f.Container, Port: f.Port, Members: f.Members})
	if err != nil {
		return err
	}
	req := admin.HomeRequest{Target: f.Target, Provider: docker.Name, Options: opts, Probe: registry.HomeProbe{Kind: f.Probe}}
	if f.IdleTimeout != "" {
		req.IdleTimeout = &f.IdleTimeout
	}
	_, _, err = d.api.PutHome(ctx, f.ID, req, 0)
	return err
}

// Remove removes home id; one that is not there is removed already.
func (d discovered) Remove(ctx context.Context, id string) error {
	if _, ok := d.g.homeWithID(id); !ok {
		return nil
	}
	return d.api.DeleteHome(ctx, id, 0)
}
