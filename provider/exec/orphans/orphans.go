// Package orphans finds and reaps, when the gateway is a child subreaper,
// the processes of a home that left its process group: the gateway's
// adopted children whose environment names the home, and their
// descendants (Find); it starts and reaps the homes' own processes
// (StartChild, WaitChild) so that an adopted one is reaped only when it is
// not a home's (ReapZombies, ReapOrphans). Design rule 29, the exec
// provider's subreaper containment.
package orphans

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// Scan is what one scan of /proc finds of a home when the gateway is a
// child subreaper (see Find).
type Scan struct {
	// PIDs are the home's live processes.
	PIDs []int
	// Unknown are adopted processes whose environment names no home, or
	// cannot be read (a process that made itself not dumpable, under a
	// gateway that is not root): any home's, as far as the gateway can tell.
	Unknown []int
	// Exiting are adopted processes on their way out: their memory is
	// gone, so is the environment that would name their home, but until
	// they are zombies they may still hold files and sockets.
	Exiting []int
}

// Find scans /proc for the live processes of home id that a child
// subreaper can find: the gateway's children whose environment names the
// home (variable, WAKEGATE_HOME: processes that lost their parent and were adopted
// by the gateway), the descendants of those and of p, the home's process
// (setsid children of a live process are not in its group), leaving out
// the gateway's own home processes (skip) and p itself. The adopted
// children that cannot be told to be some home's are unknown or exiting
// (see Scan). Only children outside the gateway's process group are
// adopted ones: every home starts in a group of its own, while what else
// the gateway runs (os/exec's children) stays in the gateway's.
func Find(variable, id string, p int, skip map[int]bool) Scan {
	var scan Scan
	self, group := os.Getpid(), unix.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return scan
	}
	want, prefix := []byte(variable+"="+id), []byte(variable+"=")
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
		raw, err := sysfile.Read("/proc/" + en.Name() + "/stat")
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
		env, err := sysfile.Read(procid.TaskFile(pid, tid, "environ"))
		switch KindOf(env, err, want, prefix, st.Pgrp == group) {
		case Mine:
			mine[pid] = true
		case Exiting:
			scan.Exiting = append(scan.Exiting, pid)
		case Unknown:
			scan.Unknown = append(scan.Unknown, pid)
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
			scan.PIDs = append(scan.PIDs, pid)
		}
	}
	slices.Sort(scan.PIDs)
	return scan
}

// Kind says whose a child of the gateway is (see Scan).
type Kind int

// Kinds of a child of the gateway.
const (
	Other   Kind = iota // another home's, or the gateway's own
	Mine                // the home's
	Unknown             // any home's, as far as the gateway can tell
	Exiting             // on its way out, its environment gone
)

// KindOf says whose a child of the gateway is, from its environment env
// (or the error reading it), the entry want that names the home, the
// prefix of any entry naming a home, and whether it is in the gateway's
// own process group (os/exec's children, not homes).
func KindOf(env []byte, err error, want, prefix []byte, gatewayGroup bool) Kind {
	switch {
	case err == nil && HasEntry(env, want):
		return Mine
	case gatewayGroup:
		return Other
	case err != nil && procid.Vanished(err):
		return Exiting
	case err != nil || !hasPrefix(env, prefix):
		return Unknown
	}
	return Other
}

// hasPrefix reports whether a NUL-separated environment holds an entry
// that starts with prefix.
func hasPrefix(env, prefix []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// HasEntry reports whether a NUL-separated environment holds entry.
func HasEntry(env, entry []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// children records the processes this gateway started as homes and has
// not reaped yet: ReapZombies leaves them to their watchers, which read
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

// StartChild starts cmd, a home's process, and records it among children
// until WaitChild.
func StartChild(cmd *exec.Cmd) error {
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

// WaitChild reaps cmd, started by StartChild, and forgets it.
func WaitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.mu.Lock()
	delete(children.pids, cmd.Process.Pid)
	children.mu.Unlock()
	return err
}

// ReapZombies reaps the zombies among the gateway's children that it did
// not start (see reapable). It returns how many it reaped.
func ReapZombies() int {
	children.gate.Lock()
	defer children.gate.Unlock()
	self, group := os.Getpid(), unix.Getpgrp()
	n := 0
	for _, pid := range OwnChildren() {
		if reapable(pid, self, group) {
			var info unix.Siginfo
			if unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil) == nil {
				n++
			}
		}
	}
	return n
}

// OwnChildren lists the gateway's children from the kernel's list of each
// of its threads' children (/proc/self/task/<tid>/children), which costs
// a read per thread, not per process on the machine. Where the kernel has
// no such list, it lists every process, for reapable to tell. A child
// missed while the list changes is found at the next SIGCHLD.
func OwnChildren() []int {
	var pids []int
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		for _, t := range tasks {
			raw, err := sysfile.Read("/proc/self/task/" + t.Name() + "/children")
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

// ReapOrphans reaps those of pids, orphans the gateway signalled, that
// have exited (see reapable), so that none stays a zombie of the gateway.
func ReapOrphans(pids []int) {
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
	raw, err := sysfile.Read("/proc/" + strconv.Itoa(pid) + "/stat")
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
