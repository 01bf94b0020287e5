package execprov

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider/exec/procid"
)

// signal sends sig to p's process group (to p alone if it leads none),
// after re-reading /proc/<pid> and checking its identity (pid, start time,
// boot) against the record. On a mismatch nothing is signalled and the
// error wraps procid.ErrGone.
func (e *Provider) signal(p *proc, sig unix.Signal) error {
	st, err := procid.Lookup(p.Identity)
	if err != nil {
		if errors.Is(err, procid.ErrReused) {
			e.log.Warn("exec: not signalling: pid belongs to another process", "pid", p.PID, "signal", sig.String(), "err", err)
		}
		return err
	}
	target := p.PID
	if st.Pgrp == p.PID {
		target = -p.PID
	}
	if err := unix.Kill(target, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pid %d: %w", p.PID, procid.ErrGone)
		}
		return fmt.Errorf("signal %s to pid %d: %w", sig, p.PID, err)
	}
	return nil
}

// resume makes sure p, the process of h, runs: SIGCONT to it and the rest
// of the home if it is stopped (resumed), which the log says. procid.ErrGone
// when p no longer lives.
func (e *Provider) resume(ctx context.Context, h *home, p *proc) (resumed bool, err error) {
	st, err := procid.Lookup(p.Identity)
	if err != nil {
		return false, err
	}
	if st.State != 'T' {
		return false, nil
	}
	if err := e.signal(p, unix.SIGCONT); err != nil {
		return false, err
	}
	e.signalLeft(h, p, h.cgroup, unix.SIGCONT)
	if e.cfg.SuspendSignal {
		e.log.Info("exec: resumed a suspended home (SIGCONT)", "home", h.id, "pid", p.PID)
	} else {
		// Not the gateway's doing: someone stopped it while it was awake.
		e.log.Warn("exec: the home's process was stopped (SIGSTOP) by something else than the gateway; resumed it (SIGCONT)",
			"home", h.id, "pid", p.PID)
	}
	e.note(h, "wakegate: pid %d was stopped; resumed it (SIGCONT)", p.PID)
	return true, e.waitState(ctx, p, func(state byte) bool { return state != 'T' })
}

// waitState waits until p's state satisfies ok, bounded by ctx and
// StopGrace; signal delivery is asynchronous.
func (e *Provider) waitState(ctx context.Context, p *proc, ok func(byte) bool) error {
	deadline := time.NewTimer(e.cfg.StopGrace)
	defer deadline.Stop()
	tick := time.NewTicker(procPollInterval)
	defer tick.Stop()
	for {
		st, err := procid.Lookup(p.Identity)
		if err != nil {
			return err
		}
		if ok(st.State) {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("pid %d still in state %c after %s", p.PID, st.State, e.cfg.StopGrace)
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return errClosed
		}
	}
}

// terminate sends SIGTERM (and SIGCONT, so a suspended home sees it) to
// p's process group, waits up to StopGrace for p and every other process
// of its group to be gone, then sends SIGKILL to what is left and waits up
// to StopGrace again. A cancelled ctx skips to SIGKILL. proven: p is
// verified gone and its group is empty. A pid that now names another
// process is not signalled, and then nothing is proven: "not signalling"
// is never followed by "proven".
func (e *Provider) terminate(ctx context.Context, h *home, p *proc) (bool, error) {
	p.stopping.Store(true)
	if err := e.signalGroup(p, unix.SIGTERM); err != nil {
		if e.contain.mode == ContainCgroup {
			// What is in the home's cgroup is the home's, whatever p's
			// pid names now.
			e.endLeft(h, p, h.cgroup)
		}
		return false, err
	}
	e.signalLeft(h, p, h.cgroup, unix.SIGTERM)
	e.signalLeft(h, p, h.cgroup, unix.SIGCONT)
	_ = e.signal(p, unix.SIGCONT)
	gone, werr := e.waitGone(ctx, h, p)
	if gone {
		return true, nil
	}
	if errors.Is(werr, errClosed) {
		return false, werr
	}
	e.signalLeft(h, p, h.cgroup, unix.SIGKILL)
	if err := e.signalGroup(p, unix.SIGKILL); err != nil {
		return false, err
	}
	if werr != nil {
		return false, werr // ctx ended; SIGKILL is sent
	}
	gone, werr = e.waitGone(ctx, h, p)
	if gone {
		return true, nil
	}
	if werr != nil {
		return false, werr
	}
	left, _ := procid.GroupMembers(p.PID)
	if unknown := e.unknownLeft(h, p); len(unknown) > 0 {
		return false, unknownError(unknown)
	}
	return false, fmt.Errorf("pid %d, its process group (%v left) or other processes of the home (%v) still present %s after SIGKILL",
		p.PID, left, e.left(h, p, h.cgroup), e.cfg.StopGrace)
}

// signalGroup sends sig to p's process group, or, once p itself is gone,
// to what is left of the group it led. A pid that now names another
// process is not signalled: the error says so.
func (e *Provider) signalGroup(p *proc, sig unix.Signal) error {
	err := e.signal(p, sig)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, procid.ErrReused):
		return fmt.Errorf("not stopped: %w", err)
	case !errors.Is(err, procid.ErrGone):
		return err
	}
	// p is gone and its pid is free (a reused pid is procid.ErrReused): the
	// kernel keeps a pid from being handed out while a process group of
	// that id has members, so the members of group p.PID are what p's
	// group left behind. p died a moment ago, during this stop.
	if err := unix.Kill(-p.PID, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %s to the process group of pid %d: %w", sig, p.PID, err)
	}
	return nil
}

// waitGone waits up to StopGrace for p's watcher to see it gone, for
// the process group p led to have no live member and for h's containment
// to hold no process (see left), and checks /proc. It returns an error
// only when ctx ends or the provider closes.
func (e *Provider) waitGone(ctx context.Context, h *home, p *proc) (bool, error) {
	t := time.NewTimer(e.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_, err := procid.Lookup(p.Identity)
		return errors.Is(err, procid.ErrGone) && !errors.Is(err, procid.ErrReused) && procid.GroupGone(p.PID) &&
			len(e.left(h, p, h.cgroup)) == 0 && len(e.unknownLeft(h, p)) == 0, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-e.done:
		return false, errClosed
	}
	reused := false
	switch _, err := procid.Lookup(p.Identity); {
	case errors.Is(err, procid.ErrReused):
		// Seen exiting, and its pid handed out again since: the kernel
		// does that only once no process group has that id.
		reused = true
	case !errors.Is(err, procid.ErrGone):
		return false, nil
	}
	done := func() bool {
		return (reused || procid.GroupGone(p.PID)) && len(e.left(h, p, h.cgroup)) == 0 && len(e.unknownLeft(h, p)) == 0
	}
	tick := time.NewTicker(procPollInterval)
	defer tick.Stop()
	for !done() {
		select {
		case <-tick.C:
		case <-t.C:
			return done(), nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-e.done:
			return false, errClosed
		}
	}
	return true, nil
}

// discard kills a process this provider just started but did not install
// and waits (bounded) until it is gone; its watcher reaps it.
func (e *Provider) discard(p *proc) {
	if err := e.signal(p, unix.SIGKILL); err != nil && !errors.Is(err, procid.ErrGone) {
		e.log.Warn("exec: discarding spare process", "pid", p.PID, "err", err)
	}
	t := time.NewTimer(e.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		e.log.Warn("exec: spare process not gone after SIGKILL", "pid", p.PID)
	case <-e.done:
	}
}
