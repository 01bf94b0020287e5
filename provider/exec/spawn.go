package execprov

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
	"github.com/wakegate/wakegate/provider/exec/orphans"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// runSpec is what a process was started from; a restart reuses it.
type runSpec struct {
	command []string
	version string
	target  string
	env     []string // the home's own, after Config.Env
	dir     string   // the working directory; "" for the home's folder
	// relayToken is the home's own relay token, given to it in
	// WAKEGATE_RELAY_TOKEN; "" for none.
	relayToken string
	// user is the account the home runs as (option user); "" for the uid
	// exec.users hands it, or the gateway's user.
	user string
	// activate starts the process with socket activation.
	activate bool
	// limits are the home's memory and CPU limits.
	limits cgroup.Limits
	// made is the digest of what a group's member runs (members.Made); ""
	// for a home's own process.
	made string
}

// specFor is what a Wake or Recreate with s starts.
func (e *Provider) specFor(s provider.Spec) runSpec {
	cmd := s.Command
	if len(cmd) == 0 {
		cmd = e.cfg.Command
	}
	return runSpec{command: append([]string(nil), cmd...), version: s.Version, target: s.Target,
		env: append([]string(nil), s.Env...), dir: s.Dir, relayToken: s.RelayToken, user: homeUser(s.Options),
		activate: e.homeActivated(s.Options), limits: limitsOf(s.Options, e.cfg.PidsMax)}
}

// spawn starts a process for h from sp and starts watching it. It reads
// as its steps: the home's user and folders (design rules 31 and 34),
// where it listens, the command with its clean environment, descriptors
// and session, in the home's log (31, 34, 29), its cgroup (29), its limits
// and the start, its process cap (34), its identity (17), and the watcher
// that tells the supervisor when it is gone (18). A step that fails leaves
// no process behind.
func (e *Provider) spawn(h *home, sp runSpec) (*proc, error) {
	return e.spawnGated(h, sp, nil)
}

// spawnGated is spawn that calls gate, when set, once the start is
// prepared and before the process starts: a gate that fails ends the
// spawn with nothing started (provider.Spec.BeforeStart).
func (e *Provider) spawnGated(h *home, sp runSpec, gate func() error) (*proc, error) {
	if len(sp.command) == 0 || sp.command[0] == "" {
		return nil, errors.New("empty command")
	}
	cred, err := e.prepareHome(h, sp)
	if err != nil {
		return nil, err
	}
	at, sock, err := e.listenFor(h, sp)
	if err != nil {
		return nil, err
	}
	args := e.expand(sp.command, h, at, sp)
	cmd, out, err := e.command(h, sp, at, sock, cred, args)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	cg, release, err := e.intoCgroup(h, cmd)
	if err != nil {
		return nil, err
	}
	defer release()
	cmd, oomBase, entered, err := e.start(h, sp, cmd, cred, gate)
	if err != nil {
		return nil, err
	}
	e.capProcesses(h, sp, cmd, cred)
	id, err := e.identify(h, cmd, cg, entered)
	if err != nil {
		return nil, err
	}
	p := &proc{Identity: id, listenAt: at, spec: sp, cmd: cmd, started: time.Now(), exited: make(chan struct{}), cgroup: cg, oomBase: oomBase}
	e.note(h, "wakegate: started pid %d on %s, version %q: %s", p.PID, at, sp.version, strings.Join(args, " "))
	e.log.Info("exec: started home", "home", h.id, "pid", p.PID, at.attr(), "version", sp.version)
	if err := e.watch(h, p); err != nil {
		// Only after Close: nobody would record this process.
		_ = e.signal(p, unix.SIGKILL)
		_ = orphans.WaitChild(cmd)
		return nil, err
	}
	return p, nil
}

// prepareHome is spawn's first step: the user the home runs as (nil for
// the gateway's own), and the home's folders, made and handed to that
// user.
func (e *Provider) prepareHome(h *home, sp runSpec) (*syscall.Credential, error) {
	cred, err := e.userOf(h, sp.user)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := homeuser.PrepareFolder(h.dir, cred.Uid, cred.Gid); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, fmt.Errorf("home dir: %w", err)
	}
	if err := os.MkdirAll(h.sys, 0o700); err != nil {
		return nil, fmt.Errorf("home dir: %w", err)
	}
	return cred, nil
}

// listenFor is where the process of h will listen: the socket the
// provider binds for it under socket activation (sock, kept on its port
// across starts), its Unix socket for a command that names {socket}, or a
// free loopback port.
func (e *Provider) listenFor(h *home, sp runSpec) (at listenAt, sock *os.File, err error) {
	switch {
	case sp.activate:
		if UsesSocket(sp.command) {
			return at, nil, errors.New("socket activation passes a TCP socket, and the command names {socket}: use {port}, or turn socket_activation off")
		}
		e.mu.Lock()
		prefer := 0
		if h.proc != nil {
			prefer = h.proc.port
		}
		kept := h.socket != nil // activationSocket returns it as it is
		e.mu.Unlock()
		if prefer == 0 && !kept {
			if r, ok := readRefFile(h); ok {
				prefer = r.Port
			}
		}
		sock, at.port, err = e.activationSocket(h, prefer)
		return at, sock, err
	case UsesSocket(sp.command):
		at.socket = filepath.Join(h.dir, socketFile)
		if err := endpoint.CheckSocketPath(at.socket); err != nil {
			return at, nil, fmt.Errorf("home %s listens on {socket}: %w; use a shorter data_dir (or home id), or {port} instead of {socket}", h.id, err)
		}
		// A socket left by an earlier process would refuse the new
		// listener's bind. The home creates the new one, as its user.
		if err := os.Remove(at.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return at, nil, fmt.Errorf("remove stale socket: %w", err)
		}
		return at, nil, nil
	default:
		at.port, err = e.freePort()
		return at, nil, err
	}
}

// command is the process to start for h: args in the home's folder (or
// sp.dir), with the home's own environment and nothing else (homeEnv),
// its output appended to the home's log (out, for the caller to close once
// the child is started), the listening socket as its only descriptor
// beyond stdio under socket activation, and its own session as cred.
func (e *Provider) command(h *home, sp runSpec, at listenAt, sock *os.File, cred *syscall.Credential, args []string) (*exec.Cmd, *os.File, error) {
	if _, err := h.log.RotateIfFull(); err != nil {
		e.log.Warn("exec: log rotation failed", "home", h.id, "err", err)
	}
	out, err := h.log.OpenAppend()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = h.dir
	if sp.dir != "" {
		cmd.Dir = sp.dir
	}
	cmd.Env = e.homeEnv(h, at, sp)
	cmd.Stdout = out
	cmd.Stderr = out
	if null, err := devNull(); err == nil {
		cmd.Stdin = null // else os/exec opens one of its own
	}
	if sock != nil {
		if err := activate(cmd, sock, e.viaShell.Load()); err != nil {
			_ = out.Close()
			return nil, nil, err
		}
	}
	// Its own session, and so its own process group: a signal to the
	// gateway's group (Ctrl-C, a service manager stopping the gateway)
	// does not reach the home, and Stop can signal the home together with
	// its children. Outside the gateway's session, no process of the home
	// can join the gateway's group (which the orphan scan takes for the
	// gateway's own), the home has no controlling terminal, and a home
	// suspended with SIGSTOP does not get the SIGHUP the kernel sends a
	// stopped group that loses its last parent in its session: it outlives
	// a gateway that dies, for the next start to adopt. Its own user when
	// it has one (cred), without supplementary groups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	return cmd, out, nil
}

// devNull is the gateway's /dev/null, the stdin of every home: opened once
// rather than by os/exec at every start.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// intoCgroup makes cmd start inside a cgroup of this start within the
// home's (cg), where the home has one: nothing it starts, however
// detached, leaves it. release closes what it opened, once the child is
// started.
func (e *Provider) intoCgroup(h *home, cmd *exec.Cmd) (cg string, release func(), err error) {
	if h.cgroup == "" {
		return "", func() {}, nil
	}
	cg = runCgroup(h)
	fd, err := cgroup.Open(cg)
	if err != nil {
		return "", nil, err
	}
	// The child is cloned into the home's cgroup.
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	return cg, func() { _ = unix.Close(fd) }, nil
}

// start sets the home's memory, CPU and process limits, calls gate (when
// set; its error ends the start before any process), and starts cmd, or
// the copy of it that runs through the shell when a traced start was
// refused (listenpid.go), which it returns. It returns as well the home's
// count of kills for its memory limit before the start (proc.oomBase),
// and whether the process entered its cgroups v1 before it ran (a traced
// start: Support.EnterStopped).
func (e *Provider) start(h *home, sp runSpec, cmd *exec.Cmd, cred *syscall.Credential, gate func() error) (_ *exec.Cmd, oomBase int64, entered bool, _ error) {
	if err := e.limits.Apply(h.cgroup, h.id, sp.limits); err != nil {
		return nil, 0, false, fmt.Errorf("limits of the home: %w", err)
	}
	oomBase = e.limits.OOMKills(h.cgroup, h.id)
	if gate != nil {
		if err := gate(); err != nil {
			return nil, 0, false, err
		}
	}
	var err error
	if tracedStart(cmd) {
		// Stopped at its first instruction, the home enters its cgroups
		// v1 whole: it runs nothing outside its limits.
		cmd, err = e.startActivated(h, cmd, func(pid int) error {
			t0 := time.Now()
			if err := e.limits.EnterStopped(h.id, pid); err != nil {
				return fmt.Errorf("limits of the home: %w", err)
			}
			e.noteMove(h, time.Since(t0))
			entered = true
			return nil
		})
	} else {
		err = orphans.StartChild(cmd)
	}
	if err != nil {
		if cred != nil && errors.Is(err, fs.ErrPermission) {
			return nil, 0, false, fmt.Errorf("start %s as uid %d: %w: the program, the folders above it and the working "+
				"directory must be open to the home's user (chmod o+rx), or set exec.users.mode off", cmd.Args[0], cred.Uid, err)
		}
		return nil, 0, false, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	return cmd, oomBase, entered, nil
}

// startActivated starts cmd, a socket-activated start, traced (stopped as
// startTraced's); where the trace is refused, through the shell, as every
// later start will be once that worked.
func (e *Provider) startActivated(h *home, cmd *exec.Cmd, stopped func(pid int) error) (*exec.Cmd, error) {
	err := startTraced(cmd, stopped)
	if !errors.Is(err, errTraceRefused) {
		return cmd, err
	}
	sh, serr := shellCopy(cmd)
	if serr != nil {
		return cmd, serr
	}
	if serr := orphans.StartChild(sh); serr != nil {
		return sh, serr
	}
	if e.viaShell.CompareAndSwap(false, true) {
		e.log.Warn("exec: socket-activated homes start through /bin/sh, which sets LISTEN_PID: a start that sets it itself was refused",
			"home", h.id, "err", err, "hint", "the gateway may not trace its own children here (a seccomp filter or kernel.yama.ptrace_scope 3); each start costs one more exec")
	}
	return sh, nil
}

// capProcesses caps the processes of a home of its own user that has no
// cgroup pids controller with RLIMIT_NPROC of its first process. Where the
// kernel refuses (no CAP_SYS_RESOURCE in a container), the home runs
// without a cap, and the operator is told.
func (e *Provider) capProcesses(h *home, sp runSpec, cmd *exec.Cmd, cred *syscall.Credential) {
	if cred == nil || e.limits.PidsInCgroup(h.cgroup) {
		return
	}
	if err := cgroup.CapNproc(cmd.Process.Pid, sp.limits.Pids); err != nil {
		e.log.Warn("exec: home runs without a process cap", "home", h.id, "err", err,
			"hint", "run the gateway with a cgroup per home (exec.containment auto or cgroup, root, cgroup v2 or a v1 pids hierarchy)")
	}
}

// identify records the identity of the just-started cmd (design rule 17)
// and moves it under the home's limits in cg, unless it entered them
// before it ran (entered). On an error the child is killed and reaped.
func (e *Provider) identify(h *home, cmd *exec.Cmd, cg string, entered bool) (procid.Identity, error) {
	id, err := childIdentity(cmd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = orphans.WaitChild(cmd)
		return procid.Identity{}, err
	}
	if entered {
		return id, nil
	}
	t0 := time.Now()
	if err := e.limits.Enter(h.id, cg); err != nil {
		_ = cgroup.Kill(cg)
		_ = cmd.Process.Kill()
		_ = orphans.WaitChild(cmd)
		return procid.Identity{}, fmt.Errorf("limits of the home: %w", err)
	}
	e.noteMove(h, time.Since(t0))
	return id, nil
}

// slowMove is how long a start's move into its cgroups v1 may take
// before the log says why, once.
var slowMove = 2 * time.Millisecond

// noteMove tells the operator, once, when a start's move into its
// cgroups v1 (limits.Enter, EnterStopped) took d, at least slowMove. The
// kernel makes each move wait out a grace period of RCU unless the
// cgroup2 hierarchy is mounted with favordynmods: measured at 5 to 10 ms
// of every start on a two-CPU guest, against a start that otherwise
// costs the gateway about 2 ms.
func (e *Provider) noteMove(h *home, d time.Duration) {
	if !e.limits.V1() || d < slowMove || !e.toldSlowMove.CompareAndSwap(false, true) {
		return
	}
	e.log.Info("exec: moving a home into its cgroup v1 hierarchies (pids, memory, cpu) made its start wait",
		"home", h.id, "took", d.Round(10*time.Microsecond),
		"cause", "the kernel waits out a grace period of RCU for each move between cgroups",
		"hint", "mount the cgroup2 hierarchy with favordynmods (mount -o remount,favordynmods on its mount point), "+
			"or set /sys/kernel/rcu_expedited to 1, or boot with cgroup v2 alone")
}

// childIdentity records the identity of a just-started child. The child
// cannot be reaped before its watcher does, so its pid is not reused yet;
// if it has already exited (a zombie has no exe link) the executable is
// taken from the command's resolved path.
func childIdentity(cmd *exec.Cmd) (procid.Identity, error) {
	pid := cmd.Process.Pid
	raw, err := sysfile.Read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procid.Identity{}, fmt.Errorf("identity of pid %d: %w", pid, err)
	}
	st, err := procid.ParseStat(raw)
	if err != nil {
		return procid.Identity{}, fmt.Errorf("identity of pid %d: %w", pid, err)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		exe, err = filepath.EvalSymlinks(cmd.Path)
		if err != nil {
			return procid.Identity{}, fmt.Errorf("identity of pid %d: %w", pid, err)
		}
		if exe, err = filepath.Abs(exe); err != nil {
			return procid.Identity{}, fmt.Errorf("identity of pid %d: %w", pid, err)
		}
	}
	return procid.Identity{PID: pid, Exe: procid.CleanExe(exe), Start: st.Start, Boot: procid.BootID()}, nil
}

// expand substitutes the placeholders in a command template.
func (e *Provider) expand(tmpl []string, h *home, at listenAt, sp runSpec) []string {
	ps := strconv.Itoa(at.port)
	ep := "http://127.0.0.1:" + ps
	if at.socket != "" {
		ps, ep = "", endpoint.Unix(at.socket)
	}
	r := strings.NewReplacer(
		"{port}", ps,
		"{socket}", at.socket,
		"{target}", sp.target,
		"{version}", sp.version,
		"{data_dir}", h.dir,
		"{id}", h.id,
		"{self}", e.self,
		"{endpoint}", ep,
	)
	out := make([]string, len(tmpl))
	for i, a := range tmpl {
		out[i] = r.Replace(a)
	}
	return out
}

// clearLeft ends what an earlier process of h left behind (see left),
// for a home with no live process: everything in a home's cgroup, or
// every orphan naming it, is the home's, and a home that does not run
// has nothing there.
func (e *Provider) clearLeft(h *home) error {
	found, remain := e.endLeft(h, nil, h.cgroup)
	if remain {
		return fmt.Errorf("processes %v the home left behind are still there after SIGKILL", found)
	}
	if len(found) > 0 {
		e.note(h, "wakegate: processes %v the home's earlier process left behind were still running; killed them", found)
		e.log.Warn("exec: processes an earlier process of the home left behind were still running; killed them", "home", h.id, "pids", found)
	}
	return nil
}

// testHookAfterSpawn, when set (by tests), runs between a wake's start of
// a process and its installation as the home's.
var testHookAfterSpawn func(*proc)
