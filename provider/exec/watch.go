package execprov

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/orphans"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// procPollInterval paces the /proc poll loop used where pidfd is not
// available, and the checks for a SIGSTOP or SIGCONT taking effect.
const procPollInterval = 20 * time.Millisecond

// watch starts the goroutine that waits for p to be gone, reaps it when it
// is a child, closes p.exited and tells the supervisor. It uses a pidfd in
// Go's poller (no thread per home); without pidfd support it polls /proc.
// procid.ErrGone: p (adopted) is not the process the ref names.
func (e *Provider) watch(h *home, p *proc) error {
	var pidfd *os.File
	if fd, err := unix.PidfdOpen(p.PID, unix.PIDFD_NONBLOCK); err == nil {
		pidfd = os.NewFile(uintptr(fd), "pidfd")
		if p.cmd == nil {
			// The pidfd pins the process it was opened on: check that this
			// is still the recorded one.
			if _, err := procid.Lookup(p.Identity); err != nil {
				pidfd.Close()
				return err
			}
		}
	} else if p.cmd == nil && errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pid %d: %w", p.PID, procid.ErrGone)
	} else {
		e.log.Debug("exec: pidfd unavailable, polling /proc", "pid", p.PID, "err", err)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		if pidfd != nil {
			pidfd.Close()
		}
		return errClosed
	}
	if pidfd != nil {
		e.watchers[pidfd] = struct{}{}
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		gone := false
		if pidfd != nil {
			gone = waitPidfd(pidfd)
			e.mu.Lock()
			delete(e.watchers, pidfd)
			e.mu.Unlock()
			pidfd.Close()
			if gone && p.cmd == nil {
				if _, err := procid.Lookup(p.Identity); err == nil {
					gone = e.pollGone(p) // not expected; trust /proc
				}
			}
		} else {
			gone = e.pollGone(p)
		}
		if !gone {
			return // closed; the process runs on
		}
		status := "exited (not a child of this gateway: exit status unknown)"
		if !p.stopping.Load() {
			e.endLeftovers(h, p)
		}
		if p.cmd != nil {
			_ = orphans.WaitChild(p.cmd) // reaps; the status is in ProcessState
			if ps := p.cmd.ProcessState; ps != nil {
				status = ps.String()
				if c := e.exitCause(h, p, ps.ExitCode()); c != "" {
					status += " (" + c + ")"
				}
			}
		}
		if n := e.limits.OOMKills(h.cgroup, h.id); p.oomBase >= 0 && n > p.oomBase {
			status += fmt.Sprintf(" (killed by the kernel: the home went over its memory_max of %d bytes)", p.spec.limits.Memory)
		}
		if p.cgroup != h.cgroup {
			cgroup.Remove(p.cgroup)
		}
		p.status = status
		close(p.exited)
		select {
		case e.exits <- exitEvent{home: h, proc: p}:
		case <-e.done:
		}
	}()
	return nil
}

// waitPidfd waits in Go's poller until the process behind pidfd exits
// (true) or the wait is cancelled by a read deadline (false).
func waitPidfd(pidfd *os.File) bool {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err != nil || n > 0
		}
	})
	return err == nil
}

// pollGone polls /proc until p no longer matches a live process (true) or
// the provider closes (false).
func (e *Provider) pollGone(p *proc) bool {
	t := time.NewTicker(procPollInterval * 10)
	defer t.Stop()
	for {
		if _, err := procid.Lookup(p.Identity); errors.Is(err, procid.ErrGone) {
			return true
		}
		select {
		case <-t.C:
		case <-e.done:
			return false
		}
	}
}

// endLeftovers kills what is left of the process group of p, a child of
// this gateway that exited on its own: processes it started and left
// behind (a wrapper that forked instead of exec'ing, a daemonised helper)
// would otherwise run on unwatched next to its restart. It runs before p
// is reaped: until then p's pid, and so the group's id, cannot be handed
// to another process, so the group is p's. It returns once they are gone,
// or after StopGrace.
func (e *Provider) endLeftovers(h *home, p *proc) {
	// Only what this start left: the home's whole cgroup may hold the
	// next start's processes already.
	if p.cgroup != h.cgroup || e.contain.mode == ContainSubreaper {
		e.endLeftoversOf(h, p)
	}
	if p.cmd == nil {
		return // adopted: its group id is all that ties its group to it
	}
	if procid.GroupGone(p.PID) {
		return
	}
	left, _ := procid.GroupMembers(p.PID)
	if err := unix.Kill(-p.PID, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		e.log.Warn("exec: ending the processes the home left behind", "home", h.id, "pid", p.PID, "err", err)
		return
	}
	e.note(h, "wakegate: pid %d exited leaving processes %v in its group; killed them", p.PID, left)
	e.log.Warn("exec: the home's process exited and left processes in its group; killed them", "home", h.id, "pid", p.PID, "left", left)
	// The restart waits for them (bounded): they may hold the home's files
	// or a port.
	deadline := time.NewTimer(e.cfg.StopGrace)
	defer deadline.Stop()
	tick := time.NewTicker(procPollInterval)
	defer tick.Stop()
	for !procid.GroupGone(p.PID) {
		select {
		case <-tick.C:
		case <-deadline.C:
			e.log.Warn("exec: processes the home left behind are not gone after SIGKILL", "home", h.id, "pid", p.PID)
			return
		case <-e.done:
			return
		}
	}
}

// endLeftoversOf ends what p left in its containment when it exited.
func (e *Provider) endLeftoversOf(h *home, p *proc) {
	if found, remain := e.endLeft(h, p, p.cgroup); len(found) > 0 {
		e.note(h, "wakegate: pid %d exited leaving processes %v; killed them", p.PID, found)
		e.log.Warn("exec: the home's process exited and left processes behind; killed them", "home", h.id, "pid", p.PID, "left", found, "all_gone", !remain)
	}
}
