package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Ownership of machine-local homes in a fleet (DESIGN rule 28). A home
// whose process lives on one machine (a provider.Quiescer: exec) has one
// runner, the gateway whose provider started or adopted its process,
// named in the record (registry.Home.Runner) with the process identity
// (ProviderRef). Only the runner starts, adopts, restarts or stops that
// process:
//
//   - a wake elsewhere that finds the home run by a live gateway proves it
//     at its recorded endpoint and forwards there; it never asks its own
//     provider, which would adopt the process and restart it as a crash
//     the moment the runner stops it. While that endpoint does not answer
//     (the runner restarts the process), the record is read again until it
//     names one that does, or another runner, or none;
//   - a stop elsewhere (an idle suspend, an operator's suspend, a removal,
//     the stop after a failed wake) keeps the lifecycle lock, stores the
//     stopped intent as always, and asks the runner to stop the process
//     (Peers.Stop); a proven stop clears the runner;
//   - a runner whose heartbeat ran out is dead: the next operation that
//     needs the process takes the home over through its own provider,
//     which adopts the recorded process only when pid, executable and start
//     time all match (rule 17), and otherwise finds it gone and starts one
//     of its own;
//   - a gateway that shuts down and stops its homes clears itself as their
//     runner (Release), so that the next request anywhere starts the home
//     at once.

// Peers is the rest of a fleet, as the engine needs it for machine-local
// homes.
type Peers interface {
	// Alive reports whether instance's heartbeat is live; an error when
	// the fleet's store does not answer.
	Alive(ctx context.Context, instance string) (bool, error)
	// Stop asks instance, the runner of the home s names, to suspend
	// (suspend true, where its provider can) or stop that home's process,
	// and returns what it did: "suspend" or "stop", and whether the stop
	// was proven (see provider.Provider.Stop).
	Stop(ctx context.Context, instance string, s provider.Spec, suspend bool) (how string, proven bool, err error)
}

// Owner answers the ownership questions of one gateway. Its fields are set
// before first use and not changed after; Lease is its own.
type Owner struct {
	// Peers is the rest of the fleet; nil for a gateway alone, to which
	// none of these rules applies.
	Peers     Peers
	Providers map[string]provider.Provider
	Store     registry.Store
	// Instance names this gateway and Machine the machine it runs on.
	Instance, Machine string
	Log               *slog.Logger
	// Lease is this gateway's heartbeat as its lease on the homes it runs
	// (lease.go).
	Lease Lease
}

// Local reports whether homes of provider name live on one machine and
// this gateway is in a fleet: ownership applies to them.
func (o *Owner) Local(name string) bool {
	if o.Peers == nil {
		return false
	}
	_, ok := o.Providers[name].(provider.Quiescer)
	return ok
}

// SetRunner names this gateway (and its machine) as the runner of r, whose
// process this gateway's provider started or adopted, when r's provider
// is machine-local in a fleet; otherwise r has no runner.
func (o *Owner) SetRunner(r *registry.Home) {
	if o.Local(r.Provider) {
		r.Runner, r.RunnerMachine = o.Instance, o.Machine
		return
	}
	r.Runner, r.RunnerMachine = "", ""
}

// RunnerElsewhere returns the runner of rec when it is another gateway of
// the fleet whose heartbeat is live, "" otherwise. A runner whose
// heartbeat ran out is logged: the caller takes the home over.
func (o *Owner) RunnerElsewhere(ctx context.Context, rec registry.Home) (string, error) {
	if !o.Local(rec.Provider) || rec.Runner == "" || rec.Runner == o.Instance {
		return "", nil
	}
	alive, err := o.Peers.Alive(ctx, rec.Runner)
	if err != nil {
		return "", fmt.Errorf("home %s: is its runner %s alive: %w", rec.ID, rec.Runner, err)
	}
	if !alive {
		o.Log.Warn("fleet: the gateway that ran the home has no live heartbeat; this gateway takes the home over",
			"home", rec.ID, "runner", rec.Runner)
		return "", nil
	}
	return rec.Runner, nil
}

// NotRunner reports whether rec, the record of a machine-local home in a
// fleet, names another gateway or none as its runner: a process this
// gateway's provider restarted for it is a copy.
func (o *Owner) NotRunner(rec registry.Home) bool {
	return o.Local(rec.Provider) && rec.Runner != o.Instance
}

// Release clears this gateway as the runner of the homes ids, whose
// processes it has stopped (a shutdown's quiesce): their desired state
// stays, and the next request on any gateway starts them again.
func (o *Owner) Release(ctx context.Context, ids []string) {
	for _, id := range ids {
		rec, err := o.Store.GetHome(ctx, id)
		if err == nil && rec.Runner != o.Instance {
			continue
		}
		if err == nil {
			_, err = registry.UpdateHome(ctx, o.Store, rec, o.Instance, func(r *registry.Home) {
				if r.Runner == o.Instance {
					r.Runner, r.RunnerMachine = "", ""
				}
			})
		}
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			o.Log.Warn("fleet: clear this gateway as the runner of a stopped home", "home", id, "err", err)
		}
	}
}

// MachineOnly reports whether endpoint is reachable on its own machine
// only: a loopback address or a Unix socket.
func MachineOnly(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return true
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrElsewhere is a request for a home whose process another gateway runs
// on another machine, at an endpoint only that machine reaches.
func ErrElsewhere(retry time.Duration, id, runner string) *fault.Error {
	return fault.New(fault.Unavailable, "home_elsewhere",
		"The home runs behind another gateway; try again shortly.").
		WithRetry(retry).
		WithHint(fmt.Sprintf("home %s runs on the machine of gateway %s, at an endpoint only that machine reaches: "+
			"route its requests to that gateway, or run the gateways that share exec homes on one machine", id, runner))
}
