package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/certstore"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/route"
)

// openStore opens the embedded store under dataDir (control/store.go).
func (g *Gateway) openStore(dataDir string) error {
	b, err := control.OpenStore(dataDir, g.cfg.ResetStore, g.log)
	if err != nil {
		return err // g.store stays nil: Close has no store to close
	}
	g.store = b
	return nil
}

// fleetOpenTimeout bounds connecting to the fleet's Redis at start.
const fleetOpenTimeout = 10 * time.Second

// openFleetStore opens the shared store the redis section names: the
// gateway then shares homes, apps, the target, lifecycle locks and session
// counts with every gateway on the same Redis.
func (g *Gateway) openFleetStore() error {
	o, err := g.cfg.Redis.Options()
	if err != nil {
		return fmt.Errorf("redis.password: %w", err)
	}
	o.Instance = g.cfg.Instance
	ctx, cancel := context.WithTimeout(context.Background(), fleetOpenTimeout)
	defer cancel()
	r, err := redis.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	// Before this run takes any lock: what is held under its name was
	// held by an earlier run that stopped without releasing it.
	n, err := r.ReleaseLeasesOf(ctx, g.cfg.Instance)
	if err != nil {
		_ = r.Close()
		return fmt.Errorf("redis: %w", err)
	}
	if n > 0 {
		g.log.Warn("fleet: released the locks an earlier run of this instance held; it stopped without releasing them (killed or crashed)",
			"instance", g.cfg.Instance, "locks", n)
	}
	g.store = r
	rt := g.cfg.Roll.Target
	g.fleet = control.NewFleet[*route.Home](ctx, control.FleetOptions{Store: r, Instance: g.cfg.Instance,
		StopGrace: g.cfg.Exec.StopGrace, IdleTick: idleTick(g.cfg),
		RollTarget: registry.Target{Version: rt.Version, Command: rt.Command, Image: rt.Image}, Log: g.log})
	g.log.Info("fleet store", "store", "redis", "prefix", o.Prefix, "instance", g.cfg.Instance)
	if g.cfg.TLS.On() && g.cfg.TLS.Storage == nil {
		cs, err := certstore.New(r, certstore.Options{Holder: g.cfg.Instance, Log: g.log.With("component", "tls")})
		if err != nil {
			return fmt.Errorf("redis: certificate storage: %w", err)
		}
		g.certStore = cs
	}
	return nil
}

// certStorage is where the TLS front door keeps certificates, keys and
// ACME accounts: tls.Storage when code set it, else the fleet's shared
// store (every gateway on the Redis obtains each certificate once), else
// nil (files under data_dir).
func (g *Gateway) certStorage() certmagic.Storage {
	if g.cfg.TLS.Storage != nil {
		return g.cfg.TLS.Storage
	}
	if g.certStore != nil {
		return g.certStore
	}
	return nil
}

// closeCertStore releases the certificate locks this gateway holds, so the
// fleet need not wait for their leases to run out.
func (g *Gateway) closeCertStore() {
	if g.certStore == nil {
		return
	}
	if err := g.certStore.Close(); err != nil {
		g.log.Warn("release certificate locks", "err", err)
	}
}
