package provider

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// errProcGone reports that no live process matches a recorded identity:
// the pid is free, reused by another process, or a zombie.
var errProcGone = errors.New("process gone")

// errProcReused reports that the recorded pid now belongs to another
// process (a different executable or start time). It wraps errProcGone.
var errProcReused = fmt.Errorf("pid reused by another process: %w", errProcGone)

// procIdentity names one process for the lifetime of the machine's boot.
// A pid alone is reused by the kernel; pid, executable and start time
// together are not (design rule 17).
type procIdentity struct {
	PID int `json:"pid"`
	// Exe is the resolved path of the executable, from /proc/<pid>/exe.
	Exe string `json:"exe"`
	// Start is the start time in clock ticks since boot, field 22 of
	// /proc/<pid>/stat.
	Start uint64 `json:"start"`
}

// procStat is what one reading of /proc/<pid> says about a process.
type procStat struct {
	procIdentity
	// State is field 3 of /proc/<pid>/stat: R, S, D, T (stopped by a
	// signal), t (tracing stop), Z (zombie), X (dead), ...
	State byte
	// Pgrp is the process group id, field 5.
	Pgrp int
}

// readProcStat reads /proc/<pid>/stat and /proc/<pid>/exe. A zombie or dead
// process is reported as errProcGone: it runs nothing and its exe is gone.
func readProcStat(pid int) (procStat, error) {
	if pid <= 0 {
		return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
		}
		return procStat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	st, err := parseProcStat(raw)
	if err != nil {
		return procStat{}, fmt.Errorf("parse stat of pid %d: %w", pid, err)
	}
	if st.State == 'Z' || st.State == 'X' || st.State == 'x' {
		return procStat{}, fmt.Errorf("pid %d is a zombie: %w", pid, errProcGone)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The process exited between the two reads.
			return procStat{}, fmt.Errorf("pid %d: %w", pid, errProcGone)
		}
		return procStat{}, fmt.Errorf("read exe of pid %d: %w", pid, err)
	}
	st.PID = pid
	st.Exe = cleanExe(exe)
	return st, nil
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
	pgrp, err := strconv.Atoi(rest[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("process group %q: %w", rest[5-3], err)
	}
	start, err := strconv.ParseUint(rest[22-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("start time %q: %w", rest[22-3], err)
	}
	return procStat{
		procIdentity: procIdentity{Start: start},
		State:        rest[0][0],
		Pgrp:         pgrp,
	}, nil
}

// cleanExe drops the " (deleted)" the kernel appends to /proc/<pid>/exe
// when the executable was replaced on disk after the process started (a
// gateway upgrade replacing the binary that {self} names). The process is
// still the one that was started; pid and start time keep it unique.
func cleanExe(exe string) string {
	return strings.TrimSuffix(exe, " (deleted)")
}

// lookupProc returns the live process that matches id on all three of pid,
// executable and start time, or an error wrapping errProcGone when there is
// none (the pid is free, reused, or a zombie).
func lookupProc(id procIdentity) (procStat, error) {
	st, err := readProcStat(id.PID)
	if err != nil {
		return procStat{}, err
	}
	if st.Start != id.Start || st.Exe != cleanExe(id.Exe) {
		return procStat{}, fmt.Errorf("pid %d is now %s started at tick %d, recorded %s started at tick %d: %w",
			id.PID, st.Exe, st.Start, id.Exe, id.Start, errProcReused)
	}
	return st, nil
}
