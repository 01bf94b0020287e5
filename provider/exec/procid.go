package execprov

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// errProcGone reports that no live process matches a recorded identity:
// the pid is free, reused by another process, or a zombie.
var errProcGone = errors.New("process gone")

// errProcReused reports that the recorded pid now belongs to another
// process (a different start time). It wraps errProcGone.
var errProcReused = fmt.Errorf("pid reused by another process: %w", errProcGone)

// errProcChanged reports that a recorded pid, start time and boot name a
// live process that runs another program than the one recorded: it is not
// adopted or signalled on that record. It wraps errProcGone.
var errProcChanged = fmt.Errorf("process runs another program: %w", errProcGone)

// procIdentity names one process. A pid alone is reused by the kernel; a
// pid and the tick the process started at are not, within one boot (the
// pid would have to be freed and handed out again inside the same clock
// tick), and the boot id tells boots apart. So pid, start time and boot
// are the identity; a process is never signalled by its pid alone (design
// rule 17). The executable is recorded too. A process this provider
// watches (it holds a pidfd on it) is known by pid and start time alone:
// a wrapper that execs its program (env, a version manager's shim,
// `sh -c 'exec ...'`) keeps both and changes its executable, and it is
// still the process that was started; the provider records the program it
// runs then (Provider.refreshExe). A process named only by a record (adopted
// after a gateway restart) must also run the recorded executable
// (Provider.recorded).
type procIdentity struct {
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

// bootID returns the kernel's random id of the current boot
// (/proc/sys/kernel/random/boot_id), or "" when it cannot be read. It is
// read once: it cannot change while this process runs.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// procStat is what one reading of /proc/<pid> says about a process.
type procStat struct {
	procIdentity
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

// readProcStat reads /proc/<pid>/stat and /proc/<pid>/exe. A zombie or dead
// process is reported as errProcGone: it runs nothing and its exe is gone.
// A process whose main thread exited while others run on is not (see
// lives): its state and executable are a live thread's.
func readProcStat(pid int) (procStat, error) {
	if pid <= 0 {
		return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if procVanished(err) {
			return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
		}
		return procStat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	st, err := parseProcStat(raw)
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat of pid %d: %w", pid, err)
	}
	state, tid, ok := lives(pid, st)
	if !ok {
		return procStat{}, fmt.Errorf("pid %d is a zombie: %w", pid, errProcGone)
	}
	st.State = state
	exe, err := os.Readlink(taskFile(pid, tid, "exe"))
	if err != nil {
		if procVanished(err) {
			// The process exited between the two reads.
			return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
		}
		return procStat{}, fmt.Errorf("read exe of pid %d: %w", pid, err)
	}
	st.PID = pid
	st.Exe = cleanExe(exe)
	st.Boot = bootID()
	return st, nil
}

// dead reports whether a state read from /proc is a zombie's or a dead
// task's.
func dead(state byte) bool {
	return state == 'Z' || state == 'X' || state == 'x'
}

// lives reports whether process pid, whose /proc/<pid>/stat says st, runs
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
func lives(pid int, st procStat) (state byte, tid int, ok bool) {
	if !dead(st.State) {
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
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, id))
		if err != nil {
			continue
		}
		ts, err := parseProcStat(raw)
		if err == nil && !dead(ts.State) {
			return ts.State, id, true
		}
	}
	return st.State, pid, false
}

// taskFile is the path of file name of process pid as thread tid sees it
// (see lives): /proc/<pid>/<name> when tid is pid.
func taskFile(pid, tid int, name string) string {
	if tid == pid {
		return fmt.Sprintf("/proc/%d/%s", pid, name)
	}
	return fmt.Sprintf("/proc/%d/task/%d/%s", pid, tid, name)
}

// procVanished reports whether err, from reading a file of /proc/<pid>,
// says the process is gone: the entry is missing (ENOENT), or the process
// is being torn down while it is read (ESRCH, which a read of
// /proc/<pid>/stat returns for a process killed a moment before).
func procVanished(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// parseProcStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself contain spaces and
// parentheses, so the fields after it are found from the last ')'.
func parseProcStat(raw []byte) (procStat, error) {
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	// rest[0] is field 3 (state), rest[i] is field i+3.
	rest := strings.Fields(string(raw[end+1:]))
	if len(rest) < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(rest))
	}
	if len(rest[0]) != 1 {
		return procStat{}, fmt.Errorf("state %q is not one character", rest[0])
	}
	ppid, err := strconv.Atoi(rest[4-3])
	if err != nil {
		return procStat{}, fmt.Errorf("parent %q: %w", rest[4-3], err)
	}
	pgrp, err := strconv.Atoi(rest[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("process group %q: %w", rest[5-3], err)
	}
	threads, err := strconv.Atoi(rest[20-3])
	if err != nil {
		return procStat{}, fmt.Errorf("threads %q: %w", rest[20-3], err)
	}
	start, err := strconv.ParseUint(rest[22-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("start time %q: %w", rest[22-3], err)
	}
	return procStat{
		procIdentity: procIdentity{Start: start},
		State:        rest[0][0],
		Pgrp:         pgrp,
		PPid:         ppid,
		Threads:      threads,
	}, nil
}

// cleanExe drops the " (deleted)" the kernel appends to /proc/<pid>/exe
// when the executable was replaced on disk after the process started (a
// gateway upgrade replacing the binary that {self} names). The process is
// still the one that was started; pid and start time keep it unique.
func cleanExe(exe string) string {
	return strings.TrimSuffix(exe, " (deleted)")
}

// lookupProc returns the live process that id names (same pid, start time
// and boot; see procIdentity), or an error wrapping errProcGone when there
// is none: the machine restarted since, the pid is free or a zombie, or it
// was reused (errProcReused). The returned Exe is the process's current
// executable, which may differ from id.Exe after an exec.
func lookupProc(id procIdentity) (procStat, error) {
	if id.Boot != "" && bootID() != "" && id.Boot != bootID() {
		return procStat{}, fmt.Errorf("pid %d was recorded before the machine restarted: %w", id.PID, errProcGone)
	}
	st, err := readProcStat(id.PID)
	if err != nil {
		return procStat{}, err
	}
	if st.Start != id.Start {
		return procStat{}, fmt.Errorf("pid %d is now %s started at tick %d, recorded %s started at tick %d: %w",
			id.PID, st.Exe, st.Start, id.Exe, id.Start, errProcReused)
	}
	return st, nil
}

// groupGone reports whether process group pgid has no live member. A
// zombie member does not count: it runs nothing and waits for its parent
// (often init, after the group's leader died) to reap it. One whose main
// thread alone exited does (see lives).
func groupGone(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return true
	}
	left, err := groupMembers(pgid)
	return err == nil && len(left) == 0
}

// groupMembers returns the live processes of group pgid (see lives), from
// a scan of /proc.
func groupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("members of process group %d: %w", pgid, err)
	}
	var pids []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		st, err := parseProcStat(raw)
		if err != nil || st.Pgrp != pgid {
			continue
		}
		if _, _, ok := lives(pid, st); ok {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
