package execprov

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider/exec/procid"
)

// orphanScan is what one scan of /proc finds of a home when the gateway
// is a child subreaper (see orphans).
type orphanScan struct {
	// pids are the home's live processes.
	pids []int
	// unknown are adopted processes whose environment names no home, or
	// cannot be read (a process that made itself not dumpable, under a
	// gateway that is not root): any home's, as far as the gateway can tell.
	unknown []int
	// exiting are adopted processes on their way out: their memory is
	// gone, so is the environment that would name their home, but until
	// they are zombies they may still hold files and sockets.
	exiting []int
}

// orphans scans /proc for the live processes of home id that a child
// subreaper can find: the gateway's children whose environment names the
// home (WAKEGATE_HOME: processes that lost their parent and were adopted
// by the gateway), the descendants of those and of p, the home's process
// (setsid children of a live process are not in its group), leaving out
// the gateway's own home processes (skip) and p itself. The adopted
// children that cannot be told to be some home's are unknown or exiting
// (see orphanScan). Only children outside the gateway's process group are
// adopted ones: every home starts in a group of its own, while what else
// the gateway runs (os/exec's children) stays in the gateway's.
func orphans(id string, p int, skip map[int]bool) orphanScan {
	var scan orphanScan
	self, group := os.Getpid(), unix.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return scan
	}
	want := []byte(EnvHome + "=" + id)
	parent := map[int]int{}
	mine := map[int]bool{}
	if p > 0 {
		mine[p] = true
	}
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid == p {
			continue
		}
		raw, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		st, err := procid.ParseStat(raw)
		if err != nil {
			continue
		}
		_, tid, ok := procid.Lives(pid, st)
		if !ok {
			continue
		}
		parent[pid] = st.PPid
		if st.PPid != self || skip[pid] {
			continue
		}
		env, err := os.ReadFile(procid.TaskFile(pid, tid, "environ"))
		switch adoptedKind(env, err, want, st.Pgrp == group) {
		case adoptedMine:
			mine[pid] = true
		case adoptedExiting:
			scan.exiting = append(scan.exiting, pid)
		case adoptedUnknown:
			scan.unknown = append(scan.unknown, pid)
		}
	}
	// The descendants of what is the home's are the home's.
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if !mine[pid] && mine[pp] && !skip[pid] {
				mine[pid], grew = true, true
			}
		}
	}
	for pid := range mine {
		if pid != p {
			scan.pids = append(scan.pids, pid)
		}
	}
	slices.Sort(scan.pids)
	return scan
}

// adopted says whose a child of the gateway is (see orphanScan).
type adopted int

const (
	adoptedOther   adopted = iota // another home's, or the gateway's own
	adoptedMine                   // the home's
	adoptedUnknown                // any home's, as far as the gateway can tell
	adoptedExiting                // on its way out, its environment gone
)

// adoptedKind says whose a child of the gateway is, from its environment
// env (or the error reading it), the entry want that names the home, and
// whether it is in the gateway's own process group (os/exec's children,
// not homes).
func adoptedKind(env []byte, err error, want []byte, gatewayGroup bool) adopted {
	switch {
	case err == nil && hasEnvEntry(env, want):
		return adoptedMine
	case gatewayGroup:
		return adoptedOther
	case err != nil && procid.Vanished(err):
		return adoptedExiting
	case err != nil || !hasEnvPrefix(env, []byte(EnvHome+"=")):
		return adoptedUnknown
	}
	return adoptedOther
}

// hasEnvPrefix reports whether a NUL-separated environment holds an entry
// that starts with prefix.
func hasEnvPrefix(env, prefix []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// hasEnvEntry reports whether a NUL-separated environment holds entry.
func hasEnvEntry(env, entry []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// children records the processes this gateway started as homes and has
// not reaped yet: reapAdopted leaves them to their watchers, which read
// their exit status. It is the process's, shared by every Provider in it,
// since any one's reaper sees the others' children.
var children = struct {
	// gate is read-held from a home's start until its pid is recorded,
	// and write-held by a reap, so that a home that exits at once is not
	// taken for an orphan.
	gate sync.RWMutex
	mu   sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// startChild starts cmd, a home's process, and records it among children
// until waitChild.
func startChild(cmd *exec.Cmd) error {
	children.gate.RLock()
	defer children.gate.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	children.mu.Lock()
	children.pids[cmd.Process.Pid] = true
	children.mu.Unlock()
	return nil
}

// waitChild reaps cmd, started by startChild, and forgets it.
func waitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.mu.Lock()
	delete(children.pids, cmd.Process.Pid)
	children.mu.Unlock()
	return err
}

// reapPause is the least time between two scans for zombies to reap: a
// home that forks and exits without pause costs the gateway at most one
// scan of /proc per reapPause.
const reapPause = 50 * time.Millisecond

// reapBackstop is how often the zombies are looked for without a SIGCHLD:
// the kernel's lists of children can miss one that another exit moves
// while they are read.
const reapBackstop = 2 * time.Second

// reapAdopted reaps the processes the gateway adopted as a child subreaper
// once they exit, until the provider closes. A detached process that
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
		reapZombies()
		select {
		case <-time.After(reapPause):
		case <-e.done:
			return
		}
	}
}

// reapZombies reaps the zombies among the gateway's children that it did
// not start (see reapable). It returns how many it reaped.
func reapZombies() int {
	children.gate.Lock()
	defer children.gate.Unlock()
	self, group := os.Getpid(), unix.Getpgrp()
	n := 0
	for _, pid := range ownChildren() {
		if reapable(pid, self, group) {
			var info unix.Siginfo
			if unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil) == nil {
				n++
			}
		}
	}
	return n
}

// ownChildren lists the gateway's children from the kernel's list of each
// of its threads' children (/proc/self/task/<tid>/children), which costs
// a read per thread, not per process on the machine. Where the kernel has
// no such list, it lists every process, for reapable to tell. A child
// missed while the list changes is found at the next SIGCHLD.
func ownChildren() []int {
	var pids []int
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		for _, t := range tasks {
			raw, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
			if err != nil {
				pids = nil
				break
			}
			for f := range strings.FieldsSeq(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		if err == nil && len(tasks) > 0 {
			return pids
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		if pid, err := strconv.Atoi(en.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// reapOrphans reaps those of pids, orphans the gateway signalled, that
// have exited (see reapable), so that none stays a zombie of the gateway.
func reapOrphans(pids []int) {
	if len(pids) == 0 {
		return
	}
	children.gate.Lock()
	defer children.gate.Unlock()
	self, group := os.Getpid(), unix.Getpgrp()
	for _, pid := range pids {
		if reapable(pid, self, group) {
			var info unix.Siginfo
			_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
		}
	}
}

// reapable reports whether pid is a zombie of the gateway (process self,
// in process group group) that it adopted and may reap: outside the
// gateway's process group (what os/exec starts for the gateway stays in it
// and waits for itself) and not a home's process (children, which its
// watcher reaps). The caller holds children.gate, so that no home starts
// meanwhile. A pid recorded earlier may name another process since: this
// is read afresh.
func reapable(pid, self, group int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, err := procid.ParseStat(raw)
	if err != nil || st.PPid != self || st.Pgrp == group || !procid.Dead(st.State) || st.Threads > 1 {
		return false
	}
	children.mu.Lock()
	defer children.mu.Unlock()
	return !children.pids[pid]
}

// unknownLeft lists the processes the gateway adopted as a subreaper that
// it cannot tell to be some home's (see orphans): one of them may be h's,
// so no stop of h is proven while one runs. nil without a subreaper.
func (e *Provider) unknownLeft(h *home, p *proc) []int {
	if e.contain.mode != ContainSubreaper {
		return nil
	}
	return orphans(h.id, pidOf(p), e.childPIDs(p)).unknown
}

// unknownError says why a stop is not proven while the unknown processes
// (see orphanScan) run, and what ends them.
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
