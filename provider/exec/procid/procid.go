// Package procid names a process so that it is never mistaken for another:
// pid, start time and boot (Identity), read from /proc (ReadStat, Lookup),
// with the process groups and zombies of the exec provider's homes read
// the same way (GroupGone, GroupMembers, Lives).
//
// DESIGN rules that live here: 17 (a process is never signalled by pid
// alone: Lookup matches pid, start time and boot, and the caller the
// executable, before any signal).
package procid

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
)

// ErrGone reports that no live process matches a recorded identity:
// the pid is free, reused by another process, or a zombie.
var ErrGone = errors.New("process gone")

// ErrReused reports that the recorded pid now belongs to another
// process (a different start time). It wraps ErrGone.
var ErrReused = fmt.Errorf("pid reused by another process: %w", ErrGone)

// ErrChanged reports that a recorded pid, start time and boot name a
// live process that runs another program than the one recorded: it is not
// adopted or signalled on that record. It wraps ErrGone.
var ErrChanged = fmt.Errorf("process runs another program: %w", ErrGone)

// Identity names one process. A pid alone is reused by the kernel; a
// pid and the tick the process started at are not, within one boot (the
// pid would have to be freed and handed out again inside the same clock
// tick), and the boot id tells boots apart. So pid, start time and boot
// are the identity; a process is never signalled by its pid alone (design
// rule 17). The executable is recorded too. A process this provider
// watches (it holds a pidfd on it) is known by pid and start time alone:
// a wrapper that execs its program (env, a version manager's shim,
// `sh -c 'exec ...'`) keeps both and changes its executable, and it is
// still the process that was started; the provider records the program it
// runs then (execprov's refreshExe). A process named only by a record (adopted
// after a gateway restart) must also run the recorded executable
// (execprov's recorded).
type Identity struct {
	PID int `json:"pid"`
	// Exe is the resolved path of the executable, from /proc/<pid>/exe,
	// when the identity was read; an exec changes it since.
	Exe string `json:"exe"`
	// Start is the start time in clock ticks since boot, field 22 of
	// /proc/<pid>/stat.
	Start uint64 `json:"start"`
	// Boot is the kernel's boot id when the identity was read. Empty in
	// refs written before it was recorded: then the start time alone
	// stands for the boot.
	Boot string `json:"boot,omitempty"`
}

// BootID returns the kernel's random id of the current boot
// (/proc/sys/kernel/random/boot_id), or "" when it cannot be read. It is
// read once: it cannot change while this process runs.
var BootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// Stat is what one reading of /proc/<pid> says about a process.
type Stat struct {
	Identity
	// State is field 3 of /proc/<pid>/stat: R, S, D, T (stopped by a
	// signal), t (tracing stop), Z (zombie), X (dead), ...
	State byte
	// Pgrp is the process group id, field 5.
	Pgrp int
	// PPid is the parent's pid, field 4.
	PPid int
	// Threads is the number of threads, field 20.
	Threads int
}

// ReadStat reads /proc/<pid>/stat and /proc/<pid>/exe. A zombie or dead
// process is reported as ErrGone: it runs nothing and its exe is gone.
// A process whose main thread exited while others run on is not (see
// Lives): its state and executable are a live thread's.
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	raw, err := sysfile.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if Vanished(err) {
			return Stat{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return Stat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	st, err := ParseStat(raw)
	if err != nil {
		return Stat{}, fmt.Errorf("parse stat of pid %d: %w", pid, err)
	}
	state, tid, ok := Lives(pid, st)
	if !ok {
		return Stat{}, fmt.Errorf("pid %d is a zombie: %w", pid, ErrGone)
	}
	st.State = state
	exe, err := os.Readlink(TaskFile(pid, tid, "exe"))
	if err != nil {
		if Vanished(err) {
			// The process exited between the two reads.
			return Stat{}, fmt.Errorf("pid %d: %w", pid, ErrGone)
		}
		return Stat{}, fmt.Errorf("read exe of pid %d: %w", pid, err)
	}
	st.PID = pid
	st.Exe = CleanExe(exe)
	st.Boot = BootID()
	return st, nil
}

// Dead reports whether a state read from /proc is a zombie's or a dead
// task's.
func Dead(state byte) bool {
	return state == 'Z' || state == 'X' || state == 'x'
}

// Lives reports whether process pid, whose /proc/<pid>/stat says st, runs
// anything, with its state and the thread whose files stand for it (tid;
// pid itself but in the case below). A zombie runs nothing, with one
// exception: when the main thread of a process exits on its own
// (pthread_exit in main, or a raw exit of that thread) while other threads
// run on, the kernel shows the process as a zombie with no memory and no
// executable until its last thread ends. A home can leave such a process
// to look gone, so it counts as live, in the state of a live thread, whose
// /proc/<pid>/task/<tid> files hold the executable and environment. So
// does a process whose main thread has exited ahead of the others on the
// way out of an exit_group: it is gone once its last thread is, which
// also frees the files its threads share.
func Lives(pid int, st Stat) (state byte, tid int, ok bool) {
	if !Dead(st.State) {
		return st.State, pid, true
	}
	if st.Threads <= 1 {
		return st.State, pid, false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return st.State, pid, false
	}
	for _, t := range tasks {
		id, err := strconv.Atoi(t.Name())
		if err != nil || id == pid {
			continue
		}
		raw, err := sysfile.Read(TaskFile(pid, id, "stat"))
		if err != nil {
			continue
		}
		ts, err := ParseStat(raw)
		if err == nil && !Dead(ts.State) {
			return ts.State, id, true
		}
	}
	return st.State, pid, false
}

// TaskFile is the path of file name of process pid as thread tid sees it
// (see Lives): /proc/<pid>/<name> when tid is pid.
func TaskFile(pid, tid int, name string) string {
	if tid == pid {
		return fmt.Sprintf("/proc/%d/%s", pid, name)
	}
	return fmt.Sprintf("/proc/%d/task/%d/%s", pid, tid, name)
}

// Vanished reports whether err, from reading a file of /proc/<pid>,
// says the process is gone: the entry is missing (ENOENT), or the process
// is being torn down while it is read (ESRCH, which a read of
// /proc/<pid>/stat returns for a process killed a moment before).
func Vanished(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// ParseStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself contain spaces and
// parentheses, so the fields after it are found from the last ')'.
func ParseStat(raw []byte) (Stat, error) {
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return Stat{}, errors.New("no ')' after the command name")
	}
	// rest[0] is field 3 (state), rest[i] is field i+3.
	rest := strings.Fields(string(raw[end+1:]))
	if len(rest) < 20 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(rest))
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("state %q is not one character", rest[0])
	}
	ppid, err := strconv.Atoi(rest[4-3])
	if err != nil {
		return Stat{}, fmt.Errorf("parent %q: %w", rest[4-3], err)
	}
	pgrp, err := strconv.Atoi(rest[5-3])
	if err != nil {
		return Stat{}, fmt.Errorf("process group %q: %w", rest[5-3], err)
	}
	threads, err := strconv.Atoi(rest[20-3])
	if err != nil {
		return Stat{}, fmt.Errorf("threads %q: %w", rest[20-3], err)
	}
	start, err := strconv.ParseUint(rest[22-3], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("start time %q: %w", rest[22-3], err)
	}
	return Stat{
		Identity: Identity{Start: start},
		State:    rest[0][0],
		Pgrp:     pgrp,
		PPid:     ppid,
		Threads:  threads,
	}, nil
}

// CleanExe drops the " (deleted)" the kernel appends to /proc/<pid>/exe
// when the executable was replaced on disk after the process started (a
// gateway upgrade replacing the binary that {self} names). The process is
// still the one that was started; pid and start time keep it unique.
func CleanExe(exe string) string {
	return strings.TrimSuffix(exe, " (deleted)")
}

// Lookup returns the live process that id names (same pid, start time
// and boot; see Identity), or an error wrapping ErrGone when there
// is none: the machine restarted since, the pid is free or a zombie, or it
// was reused (ErrReused). The returned Exe is the process's current
// executable, which may differ from id.Exe after an exec.
func Lookup(id Identity) (Stat, error) {
	if id.Boot != "" && BootID() != "" && id.Boot != BootID() {
		return Stat{}, fmt.Errorf("pid %d was recorded before the machine restarted: %w", id.PID, ErrGone)
	}
	st, err := ReadStat(id.PID)
	if err != nil {
		return Stat{}, err
	}
	if st.Start != id.Start {
		return Stat{}, fmt.Errorf("pid %d is now %s started at tick %d, recorded %s started at tick %d: %w",
			id.PID, st.Exe, st.Start, id.Exe, id.Start, ErrReused)
	}
	return st, nil
}

// GroupGone reports whether process group pgid has no live member. A
// zombie member does not count: it runs nothing and waits for its parent
// (often init, after the group's leader died) to reap it. One whose main
// thread alone exited does (see Lives).
func GroupGone(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	left, err := GroupMembers(pgid)
	return err == nil && len(left) == 0
}

// GroupMembers returns the live processes of group pgid (see Lives), from
// a scan of /proc that began after the call. Callers at the same moment
// share one scan (groupScans): when many homes exit at once, each asking
// whether its group is gone, the machine's processes are read once per
// round rather than once per home.
func GroupMembers(pgid int) ([]int, error) {
	groups, err := groupScans.scan()
	if err != nil {
		return nil, fmt.Errorf("members of process group %d: %w", pgid, err)
	}
	return slices.Clone(groups[pgid]), nil
}

// groupScans is the shared scan of GroupMembers.
var groupScans scanner

// scanner runs scans of /proc for callers that each need one begun after
// they asked: callers that ask while a scan runs join the next one, which
// the first of them runs when the running one ends.
type scanner struct {
	run     sync.Mutex // held while a scan runs
	mu      sync.Mutex // guards pending
	pending *scanRound // the next scan, not begun, with its callers
	scans   atomic.Int64
}

// scanRound is one scan and what it found.
type scanRound struct {
	callers int
	done    chan struct{}
	groups  map[int][]int
	err     error
}

func (s *scanner) scan() (map[int][]int, error) {
	s.mu.Lock()
	if s.pending == nil {
		s.pending = &scanRound{done: make(chan struct{})}
	}
	r := s.pending
	r.callers++
	first := r.callers == 1
	s.mu.Unlock()
	if !first {
		<-r.done
		return r.groups, r.err
	}
	s.run.Lock()
	s.mu.Lock()
	s.pending = nil // who asks from now on needs a scan begun later
	s.mu.Unlock()
	r.groups, r.err = liveGroups()
	s.scans.Add(1)
	s.run.Unlock()
	close(r.done)
	return r.groups, r.err
}

// liveGroups reads the process group of every live process of the machine
// (see Lives).
func liveGroups() (map[int][]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	groups := map[int][]int{}
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		raw, err := sysfile.Read("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		st, err := ParseStat(raw)
		if err != nil {
			continue
		}
		if _, _, ok := Lives(pid, st); ok {
			groups[st.Pgrp] = append(groups[st.Pgrp], pid)
		}
	}
	return groups, nil
}
