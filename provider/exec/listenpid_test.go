package execprov

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// noTraceEnv marks the test process that runs with ptrace refused.
const noTraceEnv = "WAKEGATE_TEST_PTRACE_REFUSED"

// TestSocketActivationWhereTracingIsRefused runs a socket-activated home
// in a process where the kernel refuses ptrace, as a container's seccomp
// filter can: the start falls back to the shell, the home still sees its
// own pid in LISTEN_PID, and the provider says once that it starts
// through the shell.
func TestSocketActivationWhereTracingIsRefused(t *testing.T) {
	if os.Getenv(noTraceEnv) == "" {
		// The filter holds for a whole process and all it starts: the
		// test runs again in a process of its own.
		cmd := exec.Command(os.Args[0], "-test.run=^TestSocketActivationWhereTracingIsRefused$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), noTraceEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "started through the shell") {
			t.Fatalf("the run with ptrace refused: %v\n%s", err, out)
		}
		return
	}
	if err := refusePtrace(); err != nil {
		t.Fatalf("install a seccomp filter: %v", err)
	}
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, uintptr(os.Getppid()), 0, 0, 0, 0); errno != unix.EPERM {
		t.Fatalf("ptrace under the filter: %v, want EPERM", errno)
	}
	python, script := testbin.PythonScript(t, "activated_home.py", activatedPyHome)
	cfg := testConfig(testDataDir(t))
	cfg.Command = []string{python, script, "0"}
	cfg.SocketActivation = true
	e := newExec(t, cfg)
	for i := range 2 {
		r := wake(t, e, provider.Spec{ID: fmt.Sprintf("h%d", i), Version: "v1"})
		body, err := get(r.Endpoint, "/")
		if err != nil {
			t.Fatalf("home %d: %v", i, err)
		}
		pid := mustRef(t, r).PID
		if want := fmt.Sprintf("pid=%d listen_pid=%d fds=1 names=http", pid, pid); body != want {
			t.Fatalf("home %d says %q, want %q", i, body, want)
		}
		if !e.viaShell.Load() {
			t.Fatalf("home %d: the provider does not say it starts through the shell", i)
		}
	}
	t.Log("both homes started through the shell")
}

// refusePtrace makes every ptrace call of this process, its threads and
// what they start fail with EPERM (seccomp, SECCOMP_FILTER_FLAG_TSYNC).
func refusePtrace() error {
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		{Code: ldAbsW, K: 0}, // seccomp_data.nr
		{Code: jeqK, Jt: 0, Jf: 1, K: unix.SYS_PTRACE},
		{Code: retK, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: retK, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}
