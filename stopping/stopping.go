package stopping

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/registry"
)

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

// Users is how many of q's sessions use the running process: all of them
// for a suspend, and all but the callers waiting for the wake that asks
// when that wake is a roll (rule 8).
func (q Quiet) Users(roll bool) int {
	if roll {
		return max(q.Sessions-q.Waiting, 0)
	}
	return q.Sessions
}

// Mark is the record a stop's handshake writes before it asks the fleet:
// what the record says while the process may go.
type Mark struct {
	// Op names the stop in errors and logs: "suspend", "roll", "shutdown".
	Op string
	// Status is the status written: suspending for a suspend or a
	// shutdown, restoring for a roll (a concurrent wake joins it).
	Status registry.Status
	// KeepWanted keeps the desired state (a roll, a shutdown); otherwise
	// the home is no longer wanted running (a suspend).
	KeepWanted bool
	// Roll says the stop is a roll's recreate, inside a wake of the home:
	// callers waiting for that wake are not its users.
	Roll bool
}

// The marks of the three stops of a running home.
var (
	Suspend  = Mark{Op: "suspend", Status: registry.StatusSuspending}
	Roll     = Mark{Op: "roll", Status: registry.StatusRestoring, KeepWanted: true, Roll: true}
	Shutdown = Mark{Op: "shutdown", Status: registry.StatusSuspending, KeepWanted: true}
)

// Held is a home under its lifecycle lock, lent by the engine for the
// handshake.
type Held interface {
	// ID is the home's id.
	ID() string
	// Record is the home's record as read under the lock and last saved.
	Record() registry.Home
	// Write writes change to the record once, fenced by the lock's lease.
	Write(ctx context.Context, change func(*registry.Home)) error
	// Save is Write tried again while the store is briefly unavailable.
	Save(ctx context.Context, change func(*registry.Home)) error
}

// Quiesce is steps 2 to 4 of the handshake for the stop whose lock l is
// held for: it writes m, asks the fleet through b (nil: no one to ask),
// waiting for each gateway at most wait, and returns nil when the stop may
// go on. Otherwise the record is put back as it was and the error says why
// (fault.Busy).
func Quiesce(ctx context.Context, l Held, b StopBarrier, wait time.Duration, log *slog.Logger, m Mark) error {
	id := l.ID()
	before := l.Record()
	if err := l.Write(ctx, func(r *registry.Home) {
		if !m.KeepWanted {
			r.WantRunning = false
		}
		r.Status = m.Status
		r.Verdict = registry.VerdictNone
	}); err != nil {
		return fmt.Errorf("%s %s: mark stopping: %w", m.Op, id, err)
	}
	var (
		q   Quiet
		err error
	)
	if b != nil {
		q, err = b.Quiesce(ctx, id, wait)
	}
	n := q.Users(m.Roll)
	if err == nil && n == 0 {
		return nil
	}
	if rerr := l.Save(ctx, func(r *registry.Home) {
		r.WantRunning, r.Status, r.Verdict = before.WantRunning, before.Status, before.Verdict
	}); rerr != nil {
		log.Warn(m.Op+" backed off but the record could not be put back", "home", id, "err", rerr)
	}
	log.Info(m.Op+" backed off: the fleet still uses the home", "home", id, "sessions", n, "err", err)
	if err != nil {
		return homefault.Busy(fmt.Errorf("%s %s: the fleet did not confirm the home idle: %w", m.Op, id, err))
	}
	return homefault.Busy(fmt.Errorf("%s %s: %d session(s) on the fleet's gateways once it was marked stopping", m.Op, id, n))
}

// Outcome is what a shutdown's handshake did with one home.
type Outcome int

// The outcomes of a shutdown's handshake.
const (
	// Rest: left to the provider's own quiesce.
	Rest Outcome = iota
	// Stopped: no gateway used the home; its process was stopped.
	Stopped
	// Kept: another gateway still uses the home; its process is handed
	// over to the fleet, running.
	Kept
)

// shutdownParallel bounds how many homes a shutdown's handshake takes down
// at once, as the exec provider's own quiesce does.
const shutdownParallel = 8

// ShutdownAll runs one's handshake for each of ids, a few at a time, and
// sorts the homes by its outcome.
func ShutdownAll(ids []string, one func(id string) Outcome) (stopped, kept, rest []string) {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, shutdownParallel)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out := one(id)
			mu.Lock()
			defer mu.Unlock()
			switch out {
			case Stopped:
				stopped = append(stopped, id)
			case Kept:
				kept = append(kept, id)
			default:
				rest = append(rest, id)
			}
		})
	}
	wg.Wait()
	return stopped, kept, rest
}
