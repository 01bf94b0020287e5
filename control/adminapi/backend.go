package adminapi

import (
	"context"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/provider"
)

// Backend is the control plane as package admin sees it. Build it with
// New; it holds no state of its own beyond its dependencies.
type Backend[H Home] struct {
	d Deps[H]
}

// New returns the admin API's backend over d.
func New[H Home](d Deps[H]) *Backend[H] { return &Backend[H]{d: d} }

// About reports the instance for GET /admin/status.
func (a *Backend[H]) About() admin.About {
	in := a.d.Instance
	ab := admin.About{Instance: a.d.Name, Version: a.d.Version, StartedAt: a.d.Started, Draining: in.Draining(),
		Degraded: in.Degraded(), Warnings: in.Warnings()}
	if c, ok := a.d.Providers["exec"].(provider.ContainmentReporter); ok {
		mode, why := c.Containment()
		if mode == "" {
			mode = "process group only"
		}
		ab.Containment = string(mode) + ": " + why
	}
	if b, ok := in.(interface{ BodyBudget() admin.BodyBudget }); ok {
		bb := b.BodyBudget()
		ab.BodyBudget = &bb
	}
	return ab
}

// Events returns the engine's event bus.
func (a *Backend[H]) Events() *events.Bus { return a.d.Engine.Events() }

// FleetInstances lists the live gateways of the fleet from their session
// reports (the heartbeat), for the admin status; nil for a gateway on its
// own store.
func (a *Backend[H]) FleetInstances(ctx context.Context) ([]admin.FleetInstance, error) {
	if a.d.Fleet == nil {
		return nil, nil
	}
	reps, err := a.d.Fleet.Reports(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]admin.FleetInstance, 0, len(reps))
	for _, rep := range reps {
		fi := admin.FleetInstance{Instance: rep.Instance, Version: rep.Version, Run: rep.Run, Homes: rep.Sessions,
			HeartbeatAgeS: max(now.Sub(rep.ReportedAt), 0).Round(time.Millisecond).Seconds()}
		for _, n := range rep.Sessions {
			fi.Sessions += n
		}
		out = append(out, fi)
	}
	return out, nil
}

// ReloadView is the reload summary s as the admin API answers it.
func ReloadView(s *control.ReloadSummary) admin.Reload {
	return admin.Reload{File: s.File, HomesAdded: s.HomesAdded, HomesChanged: s.HomesChanged,
		HomesRemoved: s.HomesRemoved, HomesKept: s.HomesKept, AppsAdded: s.AppsAdded,
		AppsChanged: s.AppsChanged, AppsRemoved: s.AppsRemoved, Applied: s.Applied, NeedRestart: s.NeedRestart}
}

// Reload reads the config file again and applies it (admin.Reloader).
func (a *Backend[H]) Reload(ctx context.Context, opts admin.ReloadOptions) (admin.Reload, error) {
	return a.d.Reloader.Reload(ctx, opts)
}

var (
	_ admin.Backend   = (*Backend[Home])(nil)
	_ admin.HomePager = (*Backend[Home])(nil)
	_ admin.Denials   = (*Backend[Home])(nil)
	_ admin.Fleet     = (*Backend[Home])(nil)
	_ admin.Reloader  = (*Backend[Home])(nil)
)
