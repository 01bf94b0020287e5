package execprov

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	raw := []byte("4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 100 18446744073709551615\n")
	st, err := parseProcStat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'S' || st.Pgrp != 4242 || st.PPid != 1 || st.Threads != 1 || st.Start != 987654 {
		t.Fatalf("parsed %+v, want state S, pgrp 4242, parent 1, 1 thread, start 987654", st)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q without error", bad)
		}
	}
}

func TestReadOwnProcess(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Exe != cleanExe(self) || st.Start == 0 {
		t.Fatalf("own identity %+v, exe want %s", st, self)
	}
	if _, err := lookupProc(st.procIdentity); err != nil {
		t.Fatalf("own identity does not match itself: %v", err)
	}
	// An exec changes the executable, not the process: pid and start time
	// (and the boot) name it.
	if _, err := lookupProc(procIdentity{PID: st.PID, Exe: st.Exe + "-before-exec", Start: st.Start, Boot: st.Boot}); err != nil {
		t.Errorf("the same pid and start time with another executable: %v, want the same process", err)
	}
	if _, err := lookupProc(procIdentity{PID: st.PID, Exe: st.Exe, Start: st.Start + 1, Boot: st.Boot}); !errors.Is(err, errProcReused) || !errors.Is(err, errProcGone) {
		t.Errorf("other start time: %v, want errProcReused wrapping errProcGone", err)
	}
	if _, err := lookupProc(procIdentity{PID: st.PID, Exe: st.Exe, Start: st.Start, Boot: "an-earlier-boot"}); !errors.Is(err, errProcGone) || errors.Is(err, errProcReused) {
		t.Errorf("recorded before the machine restarted: %v, want errProcGone", err)
	}
	if _, err := lookupProc(procIdentity{PID: 1 << 30, Exe: "/x", Start: 1}); !errors.Is(err, errProcGone) || errors.Is(err, errProcReused) {
		t.Errorf("free pid: %v, want errProcGone", err)
	}
}

func TestZombieIsGone(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "no-such-mode")
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	// Until it is reaped the child stays a zombie; wait for that state,
	// with its last thread gone (while the others are still on their way
	// out the process is not done, see lives).
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		st, err := parseProcStat(raw)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == 'Z' && st.Threads == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never exited, state %c", st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := readProcStat(pid); !errors.Is(err, errProcGone) {
		t.Fatalf("zombie: %v, want errProcGone", err)
	}
}

// TestHeadlessProcessLives starts a process whose main thread exits while
// another thread runs on, which /proc/<pid>/stat shows as a zombie: it is
// read as live, in its live thread's state, with its executable, and it
// is a member of its group, until it is killed.
func TestHeadlessProcessLives(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "headless")
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	eventually(t, "the main thread to exit", func() bool { return headless(pid) })
	st, err := readProcStat(pid)
	if err != nil {
		t.Fatalf("readProcStat of a process whose main thread exited: %v, want it live", err)
	}
	if dead(st.State) || st.Exe != cleanExe(self) {
		t.Errorf("read %+v, want a live state and exe %s", st, self)
	}
	if members, err := groupMembers(pid); err != nil || !slices.Contains(members, pid) || groupGone(pid) {
		t.Errorf("members of its group: %v, %v; want it among them", members, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the killed process to be a zombie", func() bool {
		raw, err := rawStat(pid)
		return err == nil && raw.Threads == 1
	})
	if _, err := readProcStat(pid); !errors.Is(err, errProcGone) {
		t.Errorf("readProcStat of the killed process: %v, want errProcGone", err)
	}
	if !groupGone(pid) {
		t.Error("the killed process's group is not gone")
	}
}

// TestIdentitySurvivesExec starts a shell that execs another program and
// checks that the identity recorded at start still names the process after
// the exec, although its executable changed.
func TestIdentitySurvivesExec(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `read -r line; exec "$0" sleep`, self)
	cmd.Env = append(os.Environ(), "EXEC_TEST_HOME=1", "GORACE=atexit_sleep_ms=0")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	before, err := childIdentity(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if before.Exe == cleanExe(self) {
		t.Fatalf("recorded %s before the exec", before.Exe)
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := lookupProc(before)
		if err != nil {
			t.Fatalf("after the exec the recorded identity %+v names no process: %v", before, err)
		}
		if st.Exe == cleanExe(self) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell never ran exec: still %s", st.Exe)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCleanExe(t *testing.T) {
	if got := cleanExe("/usr/bin/wakegate (deleted)"); got != "/usr/bin/wakegate" {
		t.Fatalf("cleanExe = %q", got)
	}
	if got := cleanExe("/usr/bin/wakegate"); got != "/usr/bin/wakegate" {
		t.Fatalf("cleanExe = %q", got)
	}
}
