package execprov

import (
	"fmt"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// reasonLogLines is how many log lines a failure reason quotes.
const reasonLogLines = 5

// supervise restarts wanted homes whose process exits, within the budget.
func (e *Provider) supervise() {
	defer e.wg.Done()
	for {
		select {
		case <-e.done:
			return
		case ev := <-e.exits:
			e.handleExit(ev)
		}
	}
}

// installLocked makes p the process of h, and reports whether p's exit
// reached the supervisor before (redeliver it then). e.mu is held.
func (e *Provider) installLocked(h *home, p *proc) (exitedEarly bool) {
	h.proc = p
	h.limits = p.spec.limits
	p.installed = true
	return p.exitedEarly
}

// redeliver hands the supervisor again the exit of p, which came before p
// was installed as h's process and was set aside.
func (e *Provider) redeliver(h *home, p *proc) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		select {
		case e.exits <- exitEvent{home: h, proc: p}:
		case <-e.done:
		}
	}()
}

// handleExit restarts or gives up on a home whose process ev.proc is gone,
// if that process was the home's current one and the home is wanted.
func (e *Provider) handleExit(ev exitEvent) {
	h, p := ev.home, ev.proc
	// Wait for a restart's report of the process that ran (h.told).
	h.told.Lock()
	h.told.Unlock() //nolint:staticcheck // SA2001: the lock is taken only to wait for its holder
	tail := h.log.Tail(reasonLogLines)
	e.mu.Lock()
	if !p.installed {
		// A process that exits at once can be gone before the wake that
		// started it has made it the home's: set its exit aside, and the
		// installer hands it back (redeliver). A process never installed
		// (discarded) leaves it here.
		p.exitedEarly = true
		e.mu.Unlock()
		return
	}
	if h.proc != p || !h.wanted {
		e.mu.Unlock()
		e.log.Debug("exec: process gone", "home", h.id, "pid", p.PID, "status", p.status)
		return
	}
	if h.group != "" {
		// A group's member: never restarted on its own (members.go).
		reason := fmt.Sprintf("pid %d %s; last log lines: %s", p.PID, p.status, tail)
		h.failed, h.wanted, h.proc = reason, false, nil
		e.mu.Unlock()
		e.memberGone(h, p, reason)
		return
	}
	if e.cfg.MayRestart != nil {
		e.mu.Unlock()
		may := e.cfg.MayRestart(h.id)
		e.mu.Lock()
		if h.proc != p || !h.wanted {
			e.mu.Unlock()
			return // stopped or replaced while the fleet was asked
		}
		if !may {
			h.wanted, h.proc = false, nil
			e.mu.Unlock()
			e.note(h, "wakegate: pid %d %s; this gateway no longer holds the home: not restarted", p.PID, p.status)
			e.log.Warn("exec: home exited; this gateway no longer holds it in the fleet, so it is not restarted",
				"home", h.id, "pid", p.PID, "status", p.status)
			return
		}
	}
	now := time.Now()
	kept := h.restarts[:0]
	for _, t := range h.restarts {
		if now.Sub(t) < e.cfg.RestartWindow {
			kept = append(kept, t)
		}
	}
	h.restarts = kept
	if len(h.restarts) >= e.cfg.RestartBudget {
		reason := fmt.Sprintf("pid %d %s; %d restarts in %s allowed, giving up; last log lines: %s",
			p.PID, p.status, e.cfg.RestartBudget, e.cfg.RestartWindow, tail)
		h.failed, h.wanted, h.proc = reason, false, nil
		h.rtRemember(provider.Restart{Time: now, OldPID: p.PID, ExitReason: p.status, Outcome: provider.RestartGaveUp})
		e.mu.Unlock()
		e.giveUp(h, reason, p)
		return
	}
	pause := e.restartPause(p, len(h.restarts), now)
	h.restarts = append(h.restarts, now)
	ch := make(chan struct{})
	h.restarting = ch
	e.mu.Unlock()

	if pause == 0 {
		e.note(h, "wakegate: pid %d %s unexpectedly; restarting", p.PID, p.status)
		e.log.Warn("exec: home exited unexpectedly; restarting", "home", h.id, "pid", p.PID, "status", p.status)
		e.restart(h, p, ch)
		return
	}
	e.note(h, "wakegate: pid %d %s %s after its start; restarting in %s", p.PID, p.status, now.Sub(p.started).Round(time.Millisecond), pause)
	e.log.Warn("exec: home exited soon after its start; restarting after a pause", "home", h.id, "pid", p.PID, "status", p.status,
		"ran", now.Sub(p.started).Round(time.Millisecond), "pause", pause)
	// The pause runs beside the supervisor, which goes on reading the
	// exits of other homes. Operations on h wait for ch meanwhile, as
	// they do for any restart in flight.
	e.wg.Add(1) // the supervisor's own count is held: Close waits for this too
	go func() {
		defer e.wg.Done()
		if e.pause(pause) {
			e.restart(h, p, ch)
			return
		}
		e.mu.Lock()
		h.restarting = nil
		e.mu.Unlock()
		close(ch)
	}()
}

// pause waits d, and reports whether it did before the provider closed.
func (e *Provider) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.done:
		return false
	}
	select {
	case <-e.done: // closed as the pause ended
		return false
	default:
		return true
	}
}

// restartSettle is how long a process must have run for its exit to be
// restarted at once; one that exits sooner is restarted after a pause
// (restartPause).
const restartSettle = 10 * time.Second

// maxRestartPause caps the pause before a restart.
const maxRestartPause = 5 * time.Second

// restartPause returns the pause before restarting p, which exited at now
// after prior restarts of its home in the window: none for a process
// that ran restartSettle or more, or that this provider did not start
// (adopted); else cfg.RestartPause doubled for each prior restart, up to
// maxRestartPause.
func (e *Provider) restartPause(p *proc, prior int, now time.Time) time.Duration {
	if e.cfg.RestartPause <= 0 || p.started.IsZero() || now.Sub(p.started) >= restartSettle {
		return 0
	}
	pause := e.cfg.RestartPause
	for range prior {
		if pause >= maxRestartPause/2 {
			return maxRestartPause
		}
		pause *= 2
	}
	return min(pause, maxRestartPause)
}

// restart starts a new process for h in place of p, which exited, unless
// h was stopped or given another process meanwhile, and closes ch, the
// restart's mark (h.restarting), when done. It runs on the supervisor's
// goroutine, or after a pause on a goroutine of its own: the new
// process's exit may then reach the supervisor before it is installed,
// and is handed back (redeliver).
func (e *Provider) restart(h *home, p *proc, ch chan struct{}) {
	at := time.Now()
	np, err := e.spawn(h, p.spec)
	var tail string
	if err != nil {
		tail = h.log.Tail(reasonLogLines)
	}
	h.told.Lock()
	defer h.told.Unlock()
	e.mu.Lock()
	installed := err == nil && h.wanted && h.proc == p
	failed := err != nil && h.wanted && h.proc == p
	var reason string
	var early bool
	if installed {
		early = e.installLocked(h, np)
		h.rtRemember(provider.Restart{Time: at, OldPID: p.PID, NewPID: np.PID, ExitReason: p.status, Outcome: provider.RestartDone})
	} else if failed {
		reason = fmt.Sprintf("pid %d %s; restart failed: %v; last log lines: %s", p.PID, p.status, err, tail)
		h.failed, h.wanted, h.proc = reason, false, nil
		h.rtRemember(provider.Restart{Time: at, OldPID: p.PID, ExitReason: p.status, Outcome: provider.RestartFailed, Error: err.Error()})
	}
	e.mu.Unlock()
	if np != nil && !installed {
		e.discard(np) // stopped or replaced meanwhile
	}
	e.mu.Lock()
	h.restarting = nil
	e.mu.Unlock()
	close(ch)
	switch {
	case installed:
		e.record(h, np)
		e.notify(h.id, np.result())
		if early {
			e.redeliver(h, np)
		}
	case failed:
		e.giveUp(h, reason, p)
	}
}

// giveUp records and reports a home the supervisor no longer restarts
// after its process p failed. The report names p (its Ref), so a wake that
// started a new process meanwhile can tell the report is not about it.
func (e *Provider) giveUp(h *home, reason string, p *proc) {
	e.note(h, "wakegate: giving up: %s", reason)
	e.log.Error("exec: home failed", "home", h.id, "reason", reason)
	e.notify(h.id, provider.Result{State: provider.StateFailed, Reason: reason, Ref: p.result().Ref})
}

func (e *Provider) notify(id string, r provider.Result) {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(id, r)
	}
}

// tendInterval is how often the log caps are enforced, and the records
// of just started processes refreshed.
const tendInterval = time.Second

// tend rotates full home logs and refreshes the records of just started
// processes (refreshStarted), every tendInterval, until the provider closes.
func (e *Provider) tend() {
	defer e.wg.Done()
	t := time.NewTicker(tendInterval)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
			e.rotateLogs()
			e.refreshStarted()
		}
	}
}

// exeSettle is how long after its start a home's process has its record
// refreshed every tendInterval (see refreshStarted).
const exeSettle = time.Minute

// refreshStarted records again the program each process this provider
// started in the last exeSettle runs (refreshExe). A home started through
// a wrapper (`#!/usr/bin/env bash`, `sh -c 'exec …'`) execs its program
// within moments of its start; until its record says so, a gateway that
// died would leave it to the next start as a process running another
// program than recorded, not to be adopted (design rule 17). It looks at
// a process at the first tick after its start and then each time its age
// has doubled (about 1, 2, 4 … 32 s): a wrapper's exec is recorded within
// its own age again, and a storm of starts costs each process six looks
// over the minute instead of sixty.
func (e *Provider) refreshStarted() {
	var procs []homeProc
	e.mu.Lock()
	for _, h := range e.homes {
		p := h.proc
		if p == nil || p.started.IsZero() {
			continue
		}
		if age := time.Since(p.started); age < exeSettle && age >= p.nextLook {
			p.nextLook = 2 * age
			procs = append(procs, homeProc{h, p})
		}
	}
	e.mu.Unlock()
	e.refreshAll(procs)
}

// homeProc is a home with its process.
type homeProc struct {
	h *home
	p *proc
}

// refreshAll records again the program each of procs runs (refreshExe).
func (e *Provider) refreshAll(procs []homeProc) {
	for _, hp := range procs {
		if st, err := procid.Lookup(hp.p.Identity); err == nil {
			e.refreshExe(hp.h, hp.p, st)
		}
	}
}

// rotateLogs rotates the full logs of homes with a process.
func (e *Provider) rotateLogs() {
	e.mu.Lock()
	var logs []*home
	for _, h := range e.homes {
		if h.proc != nil {
			logs = append(logs, h)
		}
	}
	e.mu.Unlock()
	for _, h := range logs {
		if _, err := h.log.RotateIfFull(); err != nil {
			e.log.Warn("exec: log rotation failed", "home", h.id, "err", err)
		}
	}
}
