package execprov

import (
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider/exec/orphans"
)

// reapPause is the least time between two scans for zombies to reap: a
// home that forks and exits without pause costs the gateway at most one
// scan of /proc per reapPause.
const reapPause = 50 * time.Millisecond

// reapBackstop is how often the zombies are looked for without a SIGCHLD:
// the kernel's lists of children can miss one that another exit moves
// while they are read.
const reapBackstop = 2 * time.Second

// reapAdopted reaps the processes the gateway adopted as a child subreaper
// once they exit (orphans.ReapZombies), until the provider closes. A detached process that
// exits on its own, unsignalled, would otherwise stay a zombie of the
// gateway for good, holding a pid: a home that forks and detaches in a
// loop would use up the machine's pids.
func (e *Provider) reapAdopted() {
	defer e.wg.Done()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGCHLD)
	defer signal.Stop(sig)
	backstop := time.NewTicker(reapBackstop)
	defer backstop.Stop()
	for {
		select {
		case <-sig:
		case <-backstop.C:
		case <-e.done:
			return
		}
		orphans.ReapZombies()
		select {
		case <-time.After(reapPause):
		case <-e.done:
			return
		}
	}
}

// unknownLeft lists the processes the gateway adopted as a subreaper that
// it cannot tell to be some home's (see orphans.Find): one of them may be h's,
// so no stop of h is proven while one runs. nil without a subreaper.
func (e *Provider) unknownLeft(h *home, p *proc) []int {
	if e.contain.mode != ContainSubreaper {
		return nil
	}
	return orphans.Find(EnvHome, h.id, pidOf(p), e.childPIDs(p)).Unknown
}

// unknownError says why a stop is not proven while the unknown processes
// (see orphans.Scan) run, and what ends them.
func unknownError(unknown []int) error {
	return fmt.Errorf("processes %v adopted by the gateway name no home (their WAKEGATE_HOME was removed, or "+
		"their environment cannot be read), so they may be this home's: end them by hand, "+
		"or run the gateway as root with cgroup v2", unknown)
}

// pidOf is p's pid; 0 for none.
func pidOf(p *proc) int {
	if p == nil {
		return 0
	}
	return p.PID
}

// childPIDs are the pids of the processes the gateway started as homes
// (its direct children: their own watchers reap them), which the orphan
// scan leaves alone. p, which may not be installed yet, is one of them.
func (e *Provider) childPIDs(p *proc) map[int]bool {
	skip := map[int]bool{}
	if p != nil && p.cmd != nil {
		skip[p.PID] = true
	}
	e.mu.Lock()
	for _, h := range e.homes {
		if h.proc != nil && h.proc.cmd != nil {
			skip[h.proc.PID] = true
		}
	}
	e.mu.Unlock()
	return skip
}
