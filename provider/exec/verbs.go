package execprov

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/members"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// Wake returns the running home, resuming it if it is suspended; adopts the
// process s.Ref names if it still runs (the gateway restarted), or else the
// last one the provider recorded in the home's directory; or starts a new
// process. It does not wait for the home to be ready.
func (e *Provider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	r, err := e.wake(ctx, s)
	if err != nil {
		return provider.Result{}, fmt.Errorf("exec wake %s: %w", s.ID, err)
	}
	return r, nil
}

// GatesStart reports that Wake calls Spec.BeforeStart before it starts or
// resumes a process (provider.StartGater): a start's folders, socket, log
// and cgroup are made while the wake's record is written.
func (e *Provider) GatesStart() bool { return true }

// beforeStart calls s.BeforeStart, if set.
func beforeStart(s provider.Spec) error {
	if s.BeforeStart == nil {
		return nil
	}
	return s.BeforeStart()
}

func (e *Provider) wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	if ms := members.Of(s.Options); ms != nil {
		// A group's members start one by one, each on its own: the
		// record is awaited before the first, as before any wake.
		if err := beforeStart(s); err != nil {
			return provider.Result{}, err
		}
		return e.group().Wake(ctx, s, ms)
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return provider.Result{}, err
	}
	p, wasRunning, err := e.wakeOne(ctx, h, s, e.specFor(s))
	if err != nil {
		return provider.Result{}, err
	}
	r := p.result()
	r.WasRunning = wasRunning
	return r, nil
}

// wakeOne is the process of h running: the one it has (resumed if it was
// suspended; wasRunning when it was not), or a new one started from sp.
func (e *Provider) wakeOne(ctx context.Context, h *home, s provider.Spec, sp runSpec) (p *proc, wasRunning bool, err error) {
	p, err = e.current(ctx, h, s, true)
	if err != nil {
		return nil, false, err
	}
	if p != nil {
		// A stopped process is resumed only once the wake's record allows
		// it; one that runs is merely proven again.
		if err := beforeStart(s); err != nil {
			return nil, false, err
		}
		if resumed, err := e.resume(ctx, h, p); err == nil {
			e.mu.Lock()
			if h.proc == p {
				h.wanted = true
				h.failed = ""
			}
			e.mu.Unlock()
			return p, !resumed, nil
		} else if !errors.Is(err, procid.ErrGone) {
			return nil, false, err
		}
	} else if err := e.clearLeft(h); err != nil {
		return nil, false, err
	}
	np, err := e.spawnGated(h, sp, s.BeforeStart)
	if err != nil {
		return nil, false, err
	}
	if testHookAfterSpawn != nil {
		testHookAfterSpawn(np)
	}
	if cur, ok := e.install(h, np, p); !ok {
		// The supervisor restarted the home meanwhile: keep its process.
		return cur, false, nil
	}
	return np, false, nil
}

// install makes np the home's process if the home still holds prev (or no
// process), records it, and hands the supervisor again an exit of np that
// came before the install. Otherwise np is killed and install returns the
// process the home holds now, and false.
func (e *Provider) install(h *home, np, prev *proc) (*proc, bool) {
	e.mu.Lock()
	cur := h.proc
	installed := cur == prev || cur == nil
	early := false
	if installed {
		h.wanted, h.failed = true, ""
		early = e.installLocked(h, np)
	}
	e.mu.Unlock()
	if !installed {
		e.discard(np)
		return cur, false
	}
	e.record(h, np)
	if early {
		e.redeliver(h, np)
	}
	return np, true
}

// Suspend sends SIGSTOP to the home's process group and returns once the
// process is seen stopped. ErrUnsupported unless SuspendSignal is set.
func (e *Provider) Suspend(ctx context.Context, s provider.Spec) error {
	if !e.cfg.SuspendSignal {
		return provider.ErrUnsupported
	}
	suspend := e.suspend
	if ms := members.Of(s.Options); ms != nil {
		suspend = func(ctx context.Context, s provider.Spec) error { return e.group().Suspend(ctx, s, ms) }
	}
	if err := suspend(ctx, s); err != nil {
		return fmt.Errorf("exec suspend %s: %w", s.ID, err)
	}
	return nil
}

func (e *Provider) suspend(ctx context.Context, s provider.Spec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return err
	}
	p, err := e.current(ctx, h, s, true)
	if err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("not running: %w", procid.ErrGone)
	}
	if err := e.signal(p, unix.SIGSTOP); err != nil {
		return err
	}
	e.signalLeft(h, p, h.cgroup, unix.SIGSTOP)
	if err := e.waitState(ctx, p, func(state byte) bool { return state == 'T' }); err != nil {
		return err
	}
	// A suspended home is the one most likely to be adopted by a later
	// gateway: its record names the program it runs now, which a stopped
	// process cannot change.
	if st, err := procid.Lookup(p.Identity); err == nil {
		e.refreshExe(h, p, st)
	}
	return nil
}

// Stop marks the home not wanted, then sends SIGTERM to its process group,
// waits up to StopGrace, and sends SIGKILL. proven is true once the recorded
// process is verified gone with every live member of its process group.
// When no live process matches the record nothing is signalled, and proven
// is true unless processes of the recorded process's group run on (see
// leftBehind). A ctx that ends during the grace sends SIGKILL at once and
// returns the ctx error; one already ended when Stop is called changes
// nothing.
func (e *Provider) Stop(ctx context.Context, s provider.Spec) (proven bool, err error) {
	if ms := members.Of(s.Options); ms != nil {
		proven, err = e.group().Stop(ctx, s, ms)
	} else {
		proven, err = e.stop(ctx, s)
	}
	if err != nil {
		return proven, fmt.Errorf("exec stop %s: %w", s.ID, err)
	}
	return proven, nil
}

func (e *Provider) stop(ctx context.Context, s provider.Spec) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return false, err
	}
	// Before any signal: the supervisor must not restart it.
	if err := e.settled(ctx, h, func() { h.wanted = false }); err != nil {
		return false, err
	}
	p, err := e.current(ctx, h, s, false)
	if err != nil {
		return false, err
	}
	if p == nil {
		if err := e.clearLeft(h); err != nil {
			return false, err
		}
		if unknown := e.unknownLeft(h, nil); len(unknown) > 0 {
			return false, unknownError(unknown)
		}
		if err := e.leftBehind(h, s); err != nil {
			return false, err
		}
		cgroup.Remove(h.cgroup)
		return true, nil
	}
	proven, err := e.terminate(ctx, h, p)
	if proven {
		cgroup.Remove(h.cgroup)
		e.mu.Lock()
		if h.proc == p {
			h.proc = nil
		}
		e.mu.Unlock()
		e.note(h, "wakegate: stopped pid %d", p.PID)
	}
	return proven, err
}

// Recreate stops the home (it must be proven gone), then starts it with
// s.Command (or the configured template) and s.Version, keeping its data
// directory.
func (e *Provider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	recreate := e.recreate
	if ms := members.Of(s.Options); ms != nil {
		recreate = func(ctx context.Context, s provider.Spec) (provider.Result, error) {
			return e.group().Recreate(ctx, s, ms, func(m provider.Spec) string { return groupRunner{e}.run(s.ID, m).made })
		}
	}
	r, err := recreate(ctx, s)
	if err != nil {
		return provider.Result{}, fmt.Errorf("exec recreate %s: %w", s.ID, err)
	}
	return r, nil
}

func (e *Provider) recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	proven, err := e.stop(ctx, s)
	if err != nil {
		return provider.Result{}, err
	}
	if !proven {
		return provider.Result{}, errors.New("old process not proven gone")
	}
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return provider.Result{}, err
	}
	np, err := e.spawn(h, e.specFor(s))
	if err != nil {
		return provider.Result{}, err
	}
	if _, ok := e.install(h, np, nil); !ok {
		return provider.Result{}, errors.New("home changed while recreating")
	}
	return np.result(), nil
}

// Status reports running, suspended (the process is SIGSTOPped), stopped,
// or failed with the reason, without changing anything. A home that this
// gateway has not woken yet is judged from s.Ref.
func (e *Provider) Status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if ms := members.Of(s.Options); ms != nil {
		return e.group().Status(ctx, s, ms)
	}
	return e.status(ctx, s)
}

// status is Status of a home of one process, or of one member.
func (e *Provider) status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, fmt.Errorf("exec status %s: %w", s.ID, err)
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return provider.Result{}, fmt.Errorf("exec status %s: %w", s.ID, err)
	}
	var p *proc
	var failed string
	var wanted bool
	if err := e.settled(ctx, h, func() { p, failed, wanted = h.proc, h.failed, h.wanted }); err != nil {
		return provider.Result{}, fmt.Errorf("exec status %s: %w", s.ID, err)
	}
	watched := p != nil // this provider holds a pidfd on it
	// A process this provider watches and wants running that is gone has
	// exited a moment ago: the supervisor has yet to restart it or give up
	// on it, and either is about to be reported. It is not stopped.
	pending := p != nil && wanted
	if p == nil {
		ref, _, found, err := e.recorded(h, s)
		if err != nil {
			return provider.Result{State: provider.StateUnknown, Reason: err.Error()}, fmt.Errorf("exec status %s: %w", s.ID, err)
		}
		if found {
			p = ref.proc()
		}
	}
	if p != nil {
		st, err := procid.Lookup(p.Identity)
		switch {
		case err == nil:
			if watched {
				e.refreshExe(h, p, st)
			}
			r := p.result()
			if st.State == 'T' {
				r.State = provider.StateSuspended
			}
			return r, nil
		case !errors.Is(err, procid.ErrGone):
			return provider.Result{State: provider.StateUnknown, Reason: err.Error()}, fmt.Errorf("exec status %s: %w", s.ID, err)
		case pending:
			return provider.Result{State: provider.StateUnknown, Reason: "the home's process exited a moment ago; the provider restarts it or gives up on it"}, nil
		}
	}
	if failed != "" {
		return provider.Result{State: provider.StateFailed, Reason: failed}, nil
	}
	return provider.Result{State: provider.StateStopped}, nil
}

var _ provider.Provider = (*Provider)(nil)
