package gateway

import (
	"context"
	"fmt"
	"log/slog"
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
	if err := awaitOwnName(r, g.cfg.Instance, g.log, namePoll); err != nil {
		_ = r.Close()
		return err
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

// namePoll is how often a starting gateway looks again at a heartbeat
// under its own instance name.
const namePoll = 200 * time.Millisecond

// awaitOwnName returns once no heartbeat is live under instance, the name
// this gateway is about to report under, or an error when another live
// gateway reports under it. A live heartbeat at start is an earlier run's
// that stopped without withdrawing it (killed, crashed): it lapses within
// its TTL, a few seconds, and this run waits for that. One renewed while
// this run waits can only come from a second gateway under the same name,
// whose locks this run would otherwise release and share: the start
// fails, naming the fix.
func awaitOwnName(r *redis.Store, instance string, log *slog.Logger, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), fleetOpenTimeout)
	defer cancel()
	first, live, err := reportOf(ctx, r, instance)
	if err != nil || !live {
		return err
	}
	// The wait lasts at most the report's TTL, with room for clocks.
	ttl := first.Expires.Sub(first.ReportedAt)
	ctx, cancel = context.WithTimeout(context.Background(), ttl+fleetOpenTimeout)
	defer cancel()
	log.Warn("fleet: a heartbeat under this instance name is live; waiting for it to lapse before taking over the name (an earlier run killed or crashed?)",
		"instance", instance, "reported_ago", time.Since(first.ReportedAt).Round(time.Millisecond), "ttl", ttl)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %q: the heartbeat under this name did not lapse within %s: %w", instance, ttl+fleetOpenTimeout, ctx.Err())
		case <-t.C:
		}
		cur, live, err := reportOf(ctx, r, instance)
		if err != nil {
			return err
		}
		if !live {
			log.Info("fleet: the earlier run's heartbeat lapsed", "instance", instance)
			return nil
		}
		if cur.ReportedAt.After(first.ReportedAt) {
			return fmt.Errorf("instance %q: another live gateway reports under this name (its heartbeat was renewed at %s while this one waited to start); "+
				"each gateway of a fleet needs a name of its own: set instance in this gateway's config, or leave it out for host-pid",
				instance, cur.ReportedAt.Format(time.RFC3339Nano))
		}
	}
}

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
// report to lapse (awaitOwnName).
func (g *Gateway) withdrawHeartbeat() {
	r, ok := g.store.(*redis.Store)
	if !ok || g.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.WithdrawReport(ctx, g.cfg.Instance); err != nil {
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
