package execprov

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/provider/exec/procid"

	"github.com/wakegate/wakegate/internal/testbin"
)

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
	testbin.Eventually(t, "the child to exit (a zombie of one thread)", func() bool {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		st, err := procid.ParseStat(raw)
		if err != nil {
			t.Fatal(err)
		}
		return st.State == 'Z' && st.Threads == 1
	})
	if _, err := procid.ReadStat(pid); !errors.Is(err, procid.ErrGone) {
		t.Fatalf("zombie: %v, want procid.ErrGone", err)
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
	testbin.Eventually(t, "the main thread to exit", func() bool { return headless(pid) })
	st, err := procid.ReadStat(pid)
	if err != nil {
		t.Fatalf("procid.ReadStat of a process whose main thread exited: %v, want it live", err)
	}
	if procid.Dead(st.State) || st.Exe != procid.CleanExe(self) {
		t.Errorf("read %+v, want a live state and exe %s", st, self)
	}
	if members, err := procid.GroupMembers(pid); err != nil || !slices.Contains(members, pid) || procid.GroupGone(pid) {
		t.Errorf("members of its group: %v, %v; want it among them", members, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the killed process to be a zombie", func() bool {
		raw, err := rawStat(pid)
		return err == nil && raw.Threads == 1
	})
	if _, err := procid.ReadStat(pid); !errors.Is(err, procid.ErrGone) {
		t.Errorf("procid.ReadStat of the killed process: %v, want procid.ErrGone", err)
	}
	if !procid.GroupGone(pid) {
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
	if before.Exe == procid.CleanExe(self) {
		t.Fatalf("recorded %s before the exec", before.Exe)
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the shell to run exec", func() bool {
		st, err := procid.Lookup(before)
		if err != nil {
			t.Fatalf("after the exec the recorded identity %+v names no process: %v", before, err)
		}
		return st.Exe == procid.CleanExe(self)
	})
}
