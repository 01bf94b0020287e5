package execprov

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider/exec/orphans"
)

// A socket-activated home must find its own pid in LISTEN_PID, which
// nobody knows before the process exists. The provider starts the home's
// program itself, traced (PTRACE_TRACEME): the kernel stops the new
// program at its first instruction, after the exec, and the provider
// writes the pid into the placeholder that the environment holds for it,
// then lets the program go. That costs a few system calls where the shell
// it replaces (listenPIDShell, still the fallback) costs a whole second
// exec: about 2.5 ms of every socket-activated start on a small machine.
// The home never runs a single instruction traced, and nothing of the
// trace remains once it runs.

// pidSlot is the value LISTEN_PID holds until the provider writes the pid
// over it: wider than any pid (PID_MAX_LIMIT is 4,194,304).
const pidSlot = "??????????"

// pidSlotEntry is the placeholder's whole environment entry.
const pidSlotEntry = EnvListenPID + "=" + pidSlot

// withPIDSlot is env without any LISTEN_PID of its own, and the
// placeholder last: the kernel lays the environment's strings out in
// order, so the bytes the pid leaves unused are the environment's last.
func withPIDSlot(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvListenPID+"=") {
			out = append(out, kv)
		}
	}
	return append(out, pidSlotEntry)
}

// errTraceRefused is a traced start the kernel or its policy refused (a
// seccomp filter, Yama's ptrace_scope 3, or /proc/PID/mem closed): the
// provider starts its homes through the shell from then on.
var errTraceRefused = errors.New("the traced start that sets LISTEN_PID was refused")

// startTraced starts cmd, whose environment ends with the placeholder
// (withPIDSlot), traced, and writes the child's pid into it before the
// child's first instruction; then it calls stopped, when set, with the
// child still stopped there, and lets it go. An error wrapping
// errTraceRefused leaves no child behind, and the same start may be tried
// through the shell; an error of stopped ends the start, with the child
// killed and reaped; any other error is the start's own.
func startTraced(cmd *exec.Cmd, stopped func(pid int) error) error {
	// The thread that starts the child is its tracer: ptrace answers no
	// other, so the goroutine keeps its thread until the child is let go.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr.Ptrace = true
	if err := orphans.StartChild(cmd); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("%w: %w", errTraceRefused, err)
		}
		return err
	}
	pid := cmd.Process.Pid
	atExec, err := waitExecStop(pid)
	if err != nil || !atExec {
		// Gone before its first instruction (killed meanwhile): its exit
		// is its watcher's to reap, as for any home that dies at once.
		if err == nil {
			return nil
		}
		return giveUpTraced(cmd, err)
	}
	if err := writeListenPID(pid); err != nil {
		return giveUpTraced(cmd, err)
	}
	if stopped != nil {
		if err := stopped(pid); err != nil {
			_ = cmd.Process.Kill()
			_ = orphans.WaitChild(cmd)
			return err
		}
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return giveUpTraced(cmd, fmt.Errorf("let the home go: %w", err))
	}
	return nil
}

// giveUpTraced kills and reaps the traced child of a start that could not
// set LISTEN_PID, and returns why, as errTraceRefused.
func giveUpTraced(cmd *exec.Cmd, err error) error {
	_ = cmd.Process.Kill()
	_ = orphans.WaitChild(cmd)
	return fmt.Errorf("%w: %w", errTraceRefused, err)
}

// The codes of a child's siginfo_t (si_code for SIGCHLD).
const (
	cldExited  = 1
	cldKilled  = 2
	cldDumped  = 3
	cldTrapped = 4
)

// childInfo is the kernel's siginfo_t as waitid fills it for a child.
type childInfo struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	status                int32
	_                     [100]byte
}

// waitExecStop waits until the traced child pid stops after its exec, and
// reports false if it ended instead. The wait consumes nothing
// (WNOWAIT): an exit stays for the child's watcher.
func waitExecStop(pid int) (bool, error) {
	var ci childInfo
	for {
		err := unix.Waitid(unix.P_PID, pid, (*unix.Siginfo)(unsafe.Pointer(&ci)), unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EINTR) {
			return false, fmt.Errorf("wait for the home's exec: %w", err)
		}
	}
	switch ci.code {
	case cldTrapped:
		// The exec's SIGTRAP is a synchronous signal, dequeued before any
		// other: nothing else can stop the child first.
		if ci.status != int32(unix.SIGTRAP) {
			return false, fmt.Errorf("the home stopped for signal %d after its exec, not SIGTRAP", ci.status)
		}
		return true, nil
	case cldExited, cldKilled, cldDumped:
		return false, nil
	default:
		return false, fmt.Errorf("the home reported %d after its exec, not a stop", ci.code)
	}
}

// writeListenPID writes pid into the placeholder of the stopped child
// pid's environment, and blanks the bytes it leaves over.
func writeListenPID(pid int) error {
	start, end, err := envRegion(pid)
	if err != nil {
		return err
	}
	mem, err := sysfile.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open the home's memory: %w", err)
	}
	defer unix.Close(mem) //nolint:errcheck // nothing is buffered
	// The placeholder is the last entry: read it, with its NUL and the
	// NUL that ends the entry before it, if there is one.
	want := []byte(pidSlotEntry + "\x00")
	n := min(uint64(len(want)+1), end-start)
	tail := make([]byte, n)
	if got, err := unix.Pread(mem, tail, int64(end-n)); err != nil || got != len(tail) {
		return fmt.Errorf("read the home's environment: %w", short(got, err, io.ErrUnexpectedEOF))
	}
	whole := len(tail) == len(want) || (len(tail) > len(want) && tail[len(tail)-len(want)-1] == 0)
	if !bytes.HasSuffix(tail, want) || !whole {
		return errors.New("LISTEN_PID's placeholder is not the last entry of the home's environment")
	}
	// The pid, and NULs over the rest of the placeholder.
	val := make([]byte, len(pidSlot))
	copy(val, strconv.Itoa(pid))
	if got, err := unix.Pwrite(mem, val, int64(end)-int64(len(pidSlot))-1); err != nil || got != len(val) {
		return fmt.Errorf("write LISTEN_PID: %w", short(got, err, io.ErrShortWrite))
	}
	return nil
}

// short is the error of a transfer of got bytes that ended with err, or
// with too few bytes (whole).
func short(got int, err, whole error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%d bytes: %w", got, whole)
}

// envRegion returns where the environment's strings of process pid start
// and end, from /proc/PID/stat (fields 50 and 51, shown to a process
// that may trace it).
func envRegion(pid int) (start, end uint64, err error) {
	raw, err := sysfile.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read the home's stat: %w", err)
	}
	// The command name, in parentheses, may hold anything: the fields
	// counted are those after its last ')', which start at field 3.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, 0, errors.New("the home's stat has no command name")
	}
	f := strings.Fields(string(raw[i+1:]))
	const envStart, envEnd = 50 - 3, 51 - 3
	if len(f) <= envEnd {
		return 0, 0, fmt.Errorf("the home's stat has %d fields, not the environment's", len(f)+2)
	}
	if start, err = strconv.ParseUint(f[envStart], 10, 64); err == nil {
		end, err = strconv.ParseUint(f[envEnd], 10, 64)
	}
	if err != nil || start == 0 || end <= start {
		return 0, 0, fmt.Errorf("the home's stat does not show its environment (%q to %q)", f[envStart], f[envEnd])
	}
	return start, end, nil
}
