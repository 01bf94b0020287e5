package wake

import (
	"context"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/stopping"
)

// The engine's side of the stopping handshake (package stopping, DESIGN
// rule 33): it holds the lock, lends the held home, answers other
// gateways' questions (QuiesceHome), keeps its warm verdicts only while its
// heartbeat can be live (beatValid) and stops the process.

// QuiesceHome is this gateway's answer to another gateway's Quiesce: it
// drops home id's warm verdict, so that new requests wait for the home's
// lock, and then returns its live sessions on the home.
func (e *Engine) QuiesceHome(id string) stopping.Quiet {
	h := e.home(id)
	if h == nil {
		return stopping.Quiet{}
	}
	h.warm.Store(nil)
	// Waiting is read first: a caller that leaves the slow path for the
	// process after this read is still counted in Sessions.
	w := int(h.waiting.Load())
	return stopping.Quiet{Sessions: e.o.Sessions.Count(id), Waiting: w}
}

// heartbeatTTL is the TTL of this gateway's session reports (its
// heartbeat), as Run gives them.
func (e *Engine) heartbeatTTL() time.Duration {
	tick, _ := e.idleClock.Get()
	return 3*tick + reportSlack
}

// beatValid reports whether this gateway's heartbeat can still be live in
// the fleet's eyes at now (engine time): a warm verdict is trusted only
// then. Always true outside a fleet, and before the first heartbeat.
func (e *Engine) beatValid(now time.Duration) bool {
	b := e.beatUntil.Load()
	return b == 0 || now < time.Duration(b)
}

// beatSent records a heartbeat that the store took, sent at engine time
// at with ttl: the fleet sees it live until at least at+ttl.
func (e *Engine) beatSent(at, ttl time.Duration) {
	if e.o.Peers == nil {
		return
	}
	e.beatUntil.Store(int64(at + ttl))
}

// quiesce is steps 2 to 4 of the handshake (stopping.Quiesce) for the
// stop l holds the lock for.
func (e *Engine) quiesce(ctx context.Context, l *held, m stopping.Mark) error {
	b, _ := e.o.Peers.(stopping.StopBarrier)
	return stopping.Quiesce(ctx, stopHeld{refreshHeld{l}}, b, e.heartbeatTTL(), e.o.Log, m)
}

// stopHeld is a home held for a stop (stopping.Held).
type stopHeld struct{ refreshHeld }

func (l stopHeld) Write(ctx context.Context, change func(*registry.Home)) error {
	return l.save(ctx, change)
}

// ShutdownStop is the stopping handshake of a gateway's shutdown in a
// fleet (DESIGN rules 20 and 33), for the homes of ids whose process this
// gateway runs. Under each home's lock it marks the home stopping with its
// desired state kept and asks the fleet:
//
//   - a home no gateway uses is stopped there, under the lock, and its
//     record names no runner, so that the next request on any gateway
//     wakes it again (stopped);
//   - a home another gateway still uses is handed over: its process is
//     left running, its record names no runner, and the next wake on
//     another gateway adopts it (kept: the caller's provider must let it
//     be);
//   - anything else (no fleet, not a local home, a lock that could not be
//     had, a home with no process to speak of) is left to the provider's
//     own quiesce (rest).
func (e *Engine) ShutdownStop(ctx context.Context, ids []string) (stopped, kept, rest []string) {
	if _, ok := e.o.Peers.(stopping.StopBarrier); !ok {
		return nil, nil, ids
	}
	return stopping.ShutdownAll(ids, func(id string) stopping.Outcome { return e.shutdownStop(ctx, id) })
}

// shutdownStop is ShutdownStop for one home.
func (e *Engine) shutdownStop(ctx context.Context, id string) stopping.Outcome {
	h := e.home(id)
	if h == nil || !e.own.Local(h.spec.Provider) {
		return stopping.Rest
	}
	prov := e.o.Providers[h.spec.Provider]
	out := stopping.Rest
	err := e.runLocked(ctx, h, lifecycleOp{name: "shutdown", wait: true, lease: suspendLease,
		run: func(ctx context.Context, l *held) error {
			h.warm.Store(nil)
			if !ownership.MayRun(l.rec.Status) || (l.rec.Runner != "" && l.rec.Runner != e.o.Instance) {
				return nil
			}
			before := l.rec.Status
			norunner := func(r *registry.Home) {
				r.Status = before
				r.Runner, r.RunnerMachine = "", ""
			}
			if err := e.quiesce(ctx, l, stopping.Shutdown); err != nil {
				if !fault.Is(err, fault.Busy) {
					return err
				}
				// In use elsewhere: the process stays, for the fleet.
				out = stopping.Kept
				e.o.Log.Info("fleet: shutdown hands a home in use elsewhere over to the fleet, running", "home", id)
				return l.saveRetry(ctx, norunner)
			}
			spec := h.providerSpec(l.rec, l.rec.Version, e.roll.releases.Of(l.rec))
			proven, err := prov.Stop(ctx, spec)
			if err != nil || !proven {
				return fmt.Errorf("shutdown %s: stop: proven %v: %w", id, proven, err)
			}
			out = stopping.Stopped
			return l.saveRetry(ctx, norunner)
		}})
	if err != nil {
		e.o.Log.Warn("fleet: shutdown handshake", "home", id, "err", err)
		if out == stopping.Rest {
			return stopping.Rest
		}
	}
	return out
}
