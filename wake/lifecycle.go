package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Wake, suspend, remove and roll (which runs inside a wake) are lifecycle
// operations: one at a time per home across the fleet (DESIGN.md, rule 16).
// They all go through runLocked, which takes the home's lifecycle lock,
// reads the record after the lock is held (so the operation re-checks the
// state it acts on), runs the operation, lets it write its outcome while
// the lock is still held, and releases the lock on a detached, bounded
// context. A wake that finds the lock held waits for the holder's
// broadcast; a suspend or a removal is refused as busy.

// lifecycleOp is one lifecycle operation for runLocked.
type lifecycleOp struct {
	// name is the operation, for errors: "wake", "suspend", "remove".
	name string
	// wait makes the operation wait for a lock another operation holds
	// (until ctx is done); without it the operation is refused as busy.
	wait bool
	// lease is the lifetime of the lock's lease.
	lease time.Duration
	// detach, when positive, runs the operation on a context detached from
	// the caller's once the lock is held, bounded by detach.
	detach time.Duration
	// run does the operation on the record read after the lock was taken;
	// it checks that record before it acts.
	run func(ctx context.Context, l *held) error
	// outcome, when set, records the operation's outcome in memory while
	// the lock is still held. It runs whether run ran or not: err is run's
	// error or why the lock or the record could not be had.
	outcome func(err error)
}

// held is an operation's hold on a home: the lease of its lifecycle lock,
// and the home's record as the operation last read or wrote it.
type held struct {
	e     *Engine
	h     *home
	lease registry.Lease
	rec   registry.Home
}

// runLocked runs op on h under h's lifecycle lock (see the top of this file).
func (e *Engine) runLocked(ctx context.Context, h *home, op lifecycleOp) error {
	lease, err := e.lock(ctx, h, op)
	if err != nil {
		if op.outcome != nil {
			op.outcome(err)
		}
		return err
	}
	h.setLockedHere(true)
	l := &held{e: e, h: h, lease: lease}
	defer func() { e.unlock(ctx, h, l.lease) }()
	if op.detach > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), op.detach)
		defer cancel()
	}
	l.rec, err = e.o.Store.GetHome(ctx, h.spec.ID)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", op.name, h.spec.ID, err)
	} else {
		err = op.run(ctx, l)
	}
	if op.outcome != nil {
		op.outcome(err)
	}
	return err
}

// lock takes h's lifecycle lock for op. While another operation holds it,
// a waiting op waits for the broadcast of its release when the holder is
// on this instance, and for the store's announcement of it (Changed) when
// it is not, re-trying every lockRecheck as well (a lease left to expire is
// announced by nobody), until ctx is done; any other op is refused as busy.
func (e *Engine) lock(ctx context.Context, h *home, op lifecycleOp) (registry.Lease, error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		// Taken before the try: a release after it closes freed (on this
		// instance) or changed (on any instance sharing the store).
		freed, here := h.lockState()
		changed := e.o.Store.Changed(lockName(h.spec.ID))
		l, err := e.o.Store.Lock(ctx, lockName(h.spec.ID), e.o.Instance, op.lease)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, registry.ErrLocked) {
			if ctx.Err() != nil && op.wait {
				return registry.Lease{}, homefault.WakeTimeout(e.o.RetryAfter, "waiting for another operation on the home", err)
			}
			return registry.Lease{}, fmt.Errorf("%s %s: lock: %w", op.name, h.spec.ID, err)
		}
		if !op.wait {
			return registry.Lease{}, homefault.Busy(fmt.Errorf("%s %s: %w", op.name, h.spec.ID, err))
		}
		var recheck <-chan time.Time // nil: the holder here broadcasts its release
		if !here {
			// The holder elsewhere announces its release through the
			// store; the timer is the fallback for a lease left to expire.
			if t == nil {
				t = time.NewTimer(lockRecheck)
			} else {
				t.Reset(lockRecheck)
			}
			recheck = t.C
		}
		select {
		case <-freed:
		case <-changed:
		case <-recheck:
		case <-ctx.Done():
			return registry.Lease{}, homefault.WakeTimeout(e.o.RetryAfter, "waiting for another operation on the home",
				fmt.Errorf("%w: %w", errLockWait, ctx.Err()))
		}
	}
}

// unlock releases l on a context detached from ctx and bounded, then wakes
// every operation of this instance waiting for h's lock.
func (e *Engine) unlock(ctx context.Context, h *home, l registry.Lease) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	if err := e.o.Store.Unlock(uctx, l); err != nil && !errors.Is(err, registry.ErrLeaseLost) {
		e.o.Log.Warn("unlock", "home", h.spec.ID, "err", err)
	}
	h.setLockedHere(false)
	h.broadcastFreed()
}

func lockName(id string) string { return "home/" + id }

// lockState returns the channel closed at the next release of h's lock by
// this instance, and whether an operation of this instance holds it now.
func (h *home) lockState() (<-chan struct{}, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.freed == nil {
		h.freed = make(chan struct{})
	}
	return h.freed, h.lockedHere
}

// setLockedHere records whether an operation of this instance holds h's
// lifecycle lock.
func (h *home) setLockedHere(v bool) {
	h.mu.Lock()
	h.lockedHere = v
	h.mu.Unlock()
}

// broadcastFreed wakes everyone waiting for h's lock: the channel is closed
// and the next waiter makes a new one.
func (h *home) broadcastFreed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.freed != nil {
		close(h.freed)
		h.freed = nil
	}
}

// save applies change to the record last read and writes it with a
// compare-and-set, keeping the stored result and mirroring its status. The
// lock is held, so a conflict comes from a writer outside it (the
// provider's change callback recording a new endpoint and ref): the record
// is read again and change is applied to what is stored, so neither write
// is lost. A conflict that persists is returned.
func (l *held) save(ctx context.Context, change func(*registry.Home)) error {
	stored, err := registry.UpdateHomeUnder(ctx, l.e.o.Store, l.rec, l.e.o.Instance, l.lease, change)
	if err != nil {
		return fmt.Errorf("home %s: save: %w", l.h.spec.ID, err)
	}
	l.rec = stored
	l.e.setStatus(l.h, stored.Status)
	l.h.setVersion(stored.Version)
	return nil
}

// dropVerdict drops the home's warm verdict for the operation holding l,
// so that a request that starts after it takes the slow path and queues
// behind the lock. The operation defers the returned func with its
// error: an operation that ended in error before any write of it landed
// (the home in use, a store that refuses its first write) left the home
// and its record as they were, and the verdict is given back.
func (l *held) dropVerdict() func(err error) {
	v, gen := l.h.warm.Swap(nil), l.rec.Generation
	return func(err error) {
		if err != nil && v != nil && l.rec.Generation == gen {
			l.h.warm.CompareAndSwap(nil, v)
		}
	}
}

// saveRetry is save that tries again, with a growing pause, while the
// store fails for a reason other than a conflict, a missing record, a lost
// lock or a disk that refuses writes (a store briefly unavailable), until
// ctx is done. It returns the last error.
func (l *held) saveRetry(ctx context.Context, change func(*registry.Home)) error {
	pause := saveRetryFirst
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		err := l.save(ctx, change)
		// A disk that refuses writes (read-only, full) is not tried again
		// for the whole deadline: the store says so at once, the caller
		// fails fast, and the store's watch notices when it takes writes.
		// A lock whose lease is lost (expired while the store did not
		// answer, or taken over) never takes a write again: the
		// operation ends at once and its callers' next request takes the
		// lock afresh, instead of waiting on a write that cannot succeed.
		if err == nil || errors.Is(err, registry.ErrConflict) || errors.Is(err, registry.ErrNotFound) ||
			errors.Is(err, registry.ErrLeaseLost) || errors.Is(err, registry.ErrUnwritable) || ctx.Err() != nil {
			return err
		}
		l.e.o.Log.Warn("store write failed; trying again", "home", l.h.spec.ID, "pause", pause.String(), "err", err)
		if t == nil {
			t = time.NewTimer(pause)
		} else {
			t.Reset(pause)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return err
		}
		pause = min(2*pause, saveRetryMax)
	}
}

// stopMode says how stopHome takes a home down.
type stopMode int

const (
	// modeStop stops the home.
	modeStop stopMode = iota
	// modeSuspend suspends it where the provider can, and stops it where
	// it cannot.
	modeSuspend
	// modeAbort stops what a failed operation started: the stop goes on
	// even when the stopped intent cannot be stored, because a process
	// left running that no record names is worse than a record that still
	// says the home should run (the next wake or adoption settles it).
	// Not when the lock's lease is lost: the home may be another
	// gateway's by then, and its process is that gateway's to settle.
	modeAbort
)

// stopped is what stopHome did.
type stopped struct {
	// how is "suspend" or "stop".
	how string
	// proven is true when the provider verified the home is down.
	proven bool
}

// stopHome takes the home down: it stores the stopped intent first (so
// nothing restarts what is being stopped, DESIGN.md rule 19), drops the
// warm verdict, asks the provider, and then writes final (when not nil)
// whatever the provider said, trying the write again while ctx lasts. A
// failed intent write ends the stop before the provider is asked, except
// in modeAbort. A failed final write is returned only when the provider
// succeeded.
func (l *held) stopHome(ctx context.Context, prov provider.Provider, mode stopMode, final func(*registry.Home)) (stopped, error) {
	l.h.warm.Store(nil)
	intent := func(r *registry.Home) {
		r.WantRunning = false
		r.Status = registry.StatusSuspending
		r.Verdict = registry.VerdictNone
	}
	if err := l.save(ctx, intent); err != nil {
		if mode != modeAbort || errors.Is(err, registry.ErrLeaseLost) {
			// With the lock lost, another gateway may own the home by
			// now: its process is not this gateway's to stop (rule 32).
			return stopped{}, err
		}
		l.e.o.Log.Warn("stopping the home although its stopped intent could not be stored", "home", l.h.spec.ID, "err", err)
		if outcome := final; outcome != nil {
			// The final write carries the intent the first could not.
			final = func(r *registry.Home) { intent(r); outcome(r) }
		}
	}
	spec := l.h.providerSpec(l.rec, l.rec.Version, l.e.roll.releases.Of(l.rec))
	spec.Target = l.rec.Target
	s, via, err := l.stopVia(ctx, spec, mode == modeSuspend)
	switch {
	case via:
		// Another live gateway runs the home's process: it took it down.
	case mode == modeSuspend:
		s.how = "suspend"
		err = prov.Suspend(ctx, spec)
		s.proven = err == nil
		if errors.Is(err, provider.ErrUnsupported) {
			s.how = "stop"
			s.proven, err = prov.Stop(ctx, spec)
		}
	default:
		s.how = "stop"
		s.proven, err = prov.Stop(ctx, spec)
	}
	s.proven = s.proven && err == nil
	if err != nil {
		err = fmt.Errorf("%s %s: %w", s.how, l.h.spec.ID, err)
	} else if tell := l.e.o.Stopped; tell != nil && l.rec.Endpoint != "" {
		tell(l.h.spec.ID, l.rec.Endpoint)
	}
	if s.proven && final != nil {
		// Nothing runs: the home has no runner until its next wake.
		outcome := final
		final = func(r *registry.Home) { outcome(r); r.Runner, r.RunnerMachine = "", "" }
	}
	if final != nil {
		if serr := l.saveRetry(ctx, final); serr != nil && err == nil {
			err = serr
		}
	}
	return s, err
}
