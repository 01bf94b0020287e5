package wake

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/registry"
)

// A suspend is a fleet-wide handshake (DESIGN rule 33), never a guess from
// session reports that may be a second old:
//
//  1. The stopping gateway holds the home's lifecycle lock and has dropped
//     its own warm verdict, so its own new requests wait for the lock.
//  2. It marks the record stopping (status suspending, not wanted), a
//     write fenced by the lock's lease.
//  3. It asks every live gateway of the fleet (StopBarrier) to quiesce the
//     home: each drops its warm verdict of the home, so that its new
//     requests take the slow path and wait for the lock (and so for the
//     next wake), and only then answers with its live sessions on the home
//     (in-flight requests, WebSockets, leases). A request counts its
//     session before it looks at the verdict (route/serve.go), so every
//     request is either counted in the answer or waits.
//  4. Any live session, or a gateway whose heartbeat is live but that did
//     not answer, backs the stop off: the record returns to what it was
//     and the home stays up. A gateway whose heartbeat lapsed cannot be
//     forwarding: it stops trusting its warm verdicts the moment its own
//     heartbeat could have lapsed (beatValid), and the ones it answers
//     from after that are proven again first.
//
// The same handshake comes before every other stop of a running home's
// process: a roll's recreate (the mark is restoring, and callers waiting
// for this very wake are not users, rule 8) and a gateway's shutdown in a
// fleet (the mark keeps the desired state; a home still in use elsewhere
// is handed over to the fleet running instead of stopped).
//
// The warm path touches none of this: it reads one more atomic (the
// heartbeat's deadline) and no store. Without a fleet (one gateway on the
// embedded store) the same steps run with no one to ask.

// StopBarrier is what a fleet's peers offer for the stopping handshake: a
// Peers that implements it is asked before every stop.
type StopBarrier interface {
	// Quiesce asks every other live gateway to stop admitting new requests
	// to home id's process and answers with the sessions they still have
	// on it, summed, waiting for each at most wait. A gateway that does
	// not answer in time while its heartbeat is still live is an error.
	Quiesce(ctx context.Context, id string, wait time.Duration) (Quiet, error)
}

// Quiet is a gateway's answer to the stopping handshake, or the fleet's
// answers summed.
type Quiet struct {
	// Sessions counts the live sessions on the home: in-flight requests,
	// WebSockets, leases, and callers waiting for its next wake.
	Sessions int `json:"sessions"`
	// Waiting counts the callers among Sessions that wait for a wake of
	// the home and have sent nothing to its process.
	Waiting int `json:"waiting,omitempty"`
}

// users is how many of q's sessions use the running process: all of them
// for a suspend, and all but the callers waiting for the wake that asks
// when that wake is a roll (rule 8).
func (q Quiet) users(roll bool) int {
	if roll {
		return max(q.Sessions-q.Waiting, 0)
	}
	return q.Sessions
}

// QuiesceHome is this gateway's answer to another gateway's Quiesce: it
// drops home id's warm verdict, so that new requests wait for the home's
// lock, and then returns its live sessions on the home.
func (e *Engine) QuiesceHome(id string) Quiet {
	h := e.home(id)
	if h == nil {
		return Quiet{}
	}
	h.warm.Store(nil)
	// Waiting is read first: a caller that leaves the slow path for the
	// process after this read is still counted in Sessions.
	w := int(h.waiting.Load())
	return Quiet{Sessions: e.o.Sessions.Count(id), Waiting: w}
}

// heartbeatTTL is the TTL of this gateway's session reports (its
// heartbeat), as Run gives them.
func (e *Engine) heartbeatTTL() time.Duration {
	tick, _ := e.idleClock.get()
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

// stopMark is the record a stop's handshake writes before it asks the
// fleet: what the record says while the process may go.
type stopMark struct {
	// op names the stop in errors and logs: "suspend", "roll", "shutdown".
	op string
	// status is the status written: suspending for a suspend or a
	// shutdown, restoring for a roll (a concurrent wake joins it).
	status registry.Status
	// keepWanted keeps the desired state (a roll, a shutdown); otherwise
	// the home is no longer wanted running (a suspend).
	keepWanted bool
	// roll says the stop is a roll's recreate, inside a wake of the home:
	// callers waiting for that wake are not its users.
	roll bool
}

var (
	markSuspend  = stopMark{op: "suspend", status: registry.StatusSuspending}
	markRoll     = stopMark{op: "roll", status: registry.StatusRestoring, keepWanted: true, roll: true}
	markShutdown = stopMark{op: "shutdown", status: registry.StatusSuspending, keepWanted: true}
)

// quiesce is steps 2 to 4 of the handshake for the stop l holds the lock
// for: it writes m, asks the fleet, and returns nil when the stop may go
// on. Otherwise the record is put back as it was and the error says why
// (fault.Busy).
func (e *Engine) quiesce(ctx context.Context, l *held, m stopMark) error {
	id := l.h.spec.ID
	before := l.rec
	if err := l.save(ctx, func(r *registry.Home) {
		if !m.keepWanted {
			r.WantRunning = false
		}
		r.Status = m.status
		r.Verdict = registry.VerdictNone
	}); err != nil {
		return fmt.Errorf("%s %s: mark stopping: %w", m.op, id, err)
	}
	var (
		q   Quiet
		err error
	)
	if b, ok := e.o.Peers.(StopBarrier); ok {
		q, err = b.Quiesce(ctx, id, e.heartbeatTTL())
	}
	n := q.users(m.roll)
	if err == nil && n == 0 {
		return nil
	}
	if rerr := l.saveRetry(ctx, func(r *registry.Home) {
		r.WantRunning, r.Status, r.Verdict = before.WantRunning, before.Status, before.Verdict
	}); rerr != nil {
		e.o.Log.Warn(m.op+" backed off but the record could not be put back", "home", id, "err", rerr)
	}
	e.o.Log.Info(m.op+" backed off: the fleet still uses the home", "home", id, "sessions", n, "err", err)
	if err != nil {
		return homefault.Busy(fmt.Errorf("%s %s: the fleet did not confirm the home idle: %w", m.op, id, err))
	}
	return homefault.Busy(fmt.Errorf("%s %s: %d session(s) on the fleet's gateways once it was marked stopping", m.op, id, n))
}

// shutdownParallel bounds how many homes a shutdown's handshake takes down
// at once, as the exec provider's own quiesce does.
const shutdownParallel = 8

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
	if _, ok := e.o.Peers.(StopBarrier); !ok {
		return nil, nil, ids
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, shutdownParallel)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out := e.shutdownStop(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch out {
			case shutStopped:
				stopped = append(stopped, id)
			case shutKept:
				kept = append(kept, id)
			default:
				rest = append(rest, id)
			}
		})
	}
	wg.Wait()
	return stopped, kept, rest
}

// shutOutcome is what a shutdown's handshake did with one home.
type shutOutcome int

const (
	shutRest shutOutcome = iota
	shutStopped
	shutKept
)

// shutdownStop is ShutdownStop for one home.
func (e *Engine) shutdownStop(ctx context.Context, id string) shutOutcome {
	h := e.home(id)
	if h == nil || !e.own.Local(h.spec.Provider) {
		return shutRest
	}
	prov := e.o.Providers[h.spec.Provider]
	out := shutRest
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
			if err := e.quiesce(ctx, l, markShutdown); err != nil {
				if !fault.Is(err, fault.Busy) {
					return err
				}
				// In use elsewhere: the process stays, for the fleet.
				out = shutKept
				e.o.Log.Info("fleet: shutdown hands a home in use elsewhere over to the fleet, running", "home", id)
				return l.saveRetry(ctx, norunner)
			}
			spec := h.providerSpec(l.rec, l.rec.Version, e.roll.releaseOf(l.rec))
			proven, err := prov.Stop(ctx, spec)
			if err != nil || !proven {
				return fmt.Errorf("shutdown %s: stop: proven %v: %w", id, proven, err)
			}
			out = shutStopped
			return l.saveRetry(ctx, norunner)
		}})
	if err != nil {
		e.o.Log.Warn("fleet: shutdown handshake", "home", id, "err", err)
		if out == shutRest {
			return shutRest
		}
	}
	return out
}
