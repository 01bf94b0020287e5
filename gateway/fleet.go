package gateway

import (
	"context"
	"errors"
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
	// The heartbeat's TTL (wake's): the claim then lapses with it.
	claimTTL := 3*idleTick(g.cfg) + time.Second
	if err := takeName(r, g.cfg.Instance, thisRun(), newRunNonce(), claimTTL, g.log, namePoll); err != nil {
		_ = r.Close()
		return err
	}
	ctx, cancel = context.WithTimeout(context.Background(), fleetOpenTimeout) // the wait may have used the first
	defer cancel()
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

// namePoll is how often a starting gateway looks again at a heartbeat or
// a claim under its own instance name.
const namePoll = 200 * time.Millisecond

// reportOf returns instance's live session report, if it has one.
func reportOf(ctx context.Context, r *redis.Store, instance string) (registry.InstanceReport, bool, error) {
	reps, err := r.Reports(ctx)
	if err != nil {
		return registry.InstanceReport{}, false, fmt.Errorf("redis: %w", err)
	}
	for _, rep := range reps {
		if rep.Instance == instance {
			return rep, true, nil
		}
	}
	return registry.InstanceReport{}, false, nil
}

// withdrawHeartbeat deletes this gateway's session report as it stops, so
// the fleet counts it gone at once and its next run need not wait for the
// report to lapse (takeName). When another run holds the name, the report
// is that run's, and stays.
func (g *Gateway) withdrawHeartbeat() {
	r, ok := g.store.(*redis.Store)
	if !ok || g.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := r.WithdrawReport(ctx, g.cfg.Instance)
	var taken *redis.NameTakenError
	if errors.As(err, &taken) {
		g.log.Warn("fleet: another run holds this instance name; its heartbeat is left as it is", "instance", g.cfg.Instance)
		return
	}
	if err != nil {
		g.log.Warn("fleet: withdraw this gateway's heartbeat; the fleet counts it alive until the heartbeat lapses", "err", err)
	}
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
