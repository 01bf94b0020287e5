package wake

import (
	"context"
	"fmt"
	"time"

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
	Quiesce(ctx context.Context, id string, wait time.Duration) (int, error)
}

// QuiesceHome is this gateway's answer to another gateway's Quiesce: it
// drops home id's warm verdict, so that new requests wait for the home's
// lock, and then returns its live sessions on the home.
func (e *Engine) QuiesceHome(id string) int {
	h := e.home(id)
	if h == nil {
		return 0
	}
	h.warm.Store(nil)
	return e.o.Sessions.Count(id)
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

// quiesce is steps 2 to 4 of the handshake for the suspend l holds: it
// marks the record stopping, asks the fleet, and returns nil when the stop
// may go on. Otherwise the record is put back as it was and the error
// says why (fault.Busy).
func (e *Engine) quiesce(ctx context.Context, l *held) error {
	id := l.h.spec.ID
	before := l.rec
	if err := l.save(ctx, func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusSuspending
		r.Verdict = registry.VerdictNone
	}); err != nil {
		return fmt.Errorf("suspend %s: mark stopping: %w", id, err)
	}
	n, err := 0, error(nil)
	if b, ok := e.o.Peers.(StopBarrier); ok {
		n, err = b.Quiesce(ctx, id, e.heartbeatTTL())
	}
	if err == nil && n == 0 {
		return nil
	}
	if rerr := l.saveRetry(ctx, func(r *registry.Home) {
		r.WantRunning, r.Status, r.Verdict = before.WantRunning, before.Status, before.Verdict
	}); rerr != nil {
		e.o.Log.Warn("suspend backed off but the record could not be put back", "home", id, "err", rerr)
	}
	e.o.Log.Info("suspend backed off: the fleet still uses the home", "home", id, "sessions", n, "err", err)
	if err != nil {
		return errBusy(fmt.Errorf("suspend %s: the fleet did not confirm the home idle: %w", id, err))
	}
	return errBusy(fmt.Errorf("suspend %s: %d session(s) on the fleet's gateways once it was marked stopping", id, n))
}
