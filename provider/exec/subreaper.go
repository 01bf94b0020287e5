package execprov

import (
	"bytes"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// orphans returns the live processes of home id that a child subreaper
// can find: the gateway's children whose environment names the home
// (WAKEGATE_HOME: processes that lost their parent and were adopted by
// the gateway), the descendants of those and of p, the home's process
// (setsid children of a live process are not in its group), leaving out
// the gateway's own home processes (skip) and p itself. unknown lists the
// gateway's adopted children that name no home at all: a process that
// rewrote its environment, which may be any home's. A child outside the
// gateway's process group is one: every home starts in a group of its
// own, while what else the gateway runs (os/exec's children) stays in
// the gateway's.
func orphans(id string, p int, skip map[int]bool) (pids, unknown []int) {
	self, group := os.Getpid(), unix.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
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
		st, err := parseProcStat(raw)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue
		}
		parent[pid] = st.PPid
		if st.PPid != self || skip[pid] {
			continue
		}
		env, err := os.ReadFile("/proc/" + en.Name() + "/environ")
		switch {
		case err != nil:
		case hasEnvEntry(env, want):
			mine[pid] = true
		case st.Pgrp != group && !hasEnvPrefix(env, []byte(EnvHome+"=")):
			unknown = append(unknown, pid)
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
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, unknown
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

// reapOrphans waits for the orphans in pids that have exited, so that
// none stays a zombie of the gateway. Only these pids are waited for:
// the gateway's other children belong to whoever started them.
func reapOrphans(pids []int) {
	for _, pid := range pids {
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
	}
}

// unknownLeft lists the processes the gateway adopted as a subreaper that
// name no home (see orphans): one of them may be h's, so no stop of h is
// proven while one runs. nil without a subreaper.
func (e *Provider) unknownLeft(h *home, p *proc) []int {
	if e.contain.mode != ContainSubreaper {
		return nil
	}
	_, unknown := orphans(h.id, pidOf(p), e.childPIDs(p))
	return unknown
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
