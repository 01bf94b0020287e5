package execprov

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/homelog"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("exec provider closed")

// Provider runs homes as local processes. Each home is one process (and its
// process group) started from a command template, listening on a loopback
// port, with its own data directory and capped log. The process identity
// (pid, start time, boot; see procid.Identity) is the provider ref, so a
// restarted gateway adopts homes that still run instead of starting them
// again.
//
// Goroutines: one supervisor (restarts and failures), one log janitor
// (log caps), and one watcher per watched process, all ended by Close.
// e.mu guards the maps and per-home fields; it is never held across a wait.
type Provider struct {
	cfg    Config
	log    *slog.Logger
	self   string
	client *http.Client
	// users hands each home a uid of its own; nil when homes run as the
	// gateway's user, for the reason sharedWhy, or when every home is
	// refused, for the reason refused.
	users     *homeuser.Table
	sharedWhy string
	refused   string
	// homesDir holds the homes' folders (homeuser.Layout.Homes).
	homesDir string
	// contain is how the processes of each home are kept track of.
	contain containment
	// limits is how the homes' memory and CPU can be limited.
	limits cgroup.Support
	// viaShell is set once a traced start was refused: socket-activated
	// homes start through the shell that sets LISTEN_PID (listenpid.go).
	viaShell atomic.Bool
	// toldSlowMove is set once the log said that moves into cgroup v1
	// hierarchies are slow here (noteMove).
	toldSlowMove atomic.Bool

	exits     chan exitEvent
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu       sync.Mutex
	closed   bool
	homes    map[string]*home
	watchers map[*os.File]struct{} // pidfds being waited on; Close cancels them
}

// home is the provider's memory of one home. Homes are never removed from
// Provider.homes, so a *home stays valid.
type home struct {
	id  string
	dir string // the home's folder: {data_dir}, HOME, its working directory
	// group is the id of the group home whose member this is (groups.go);
	// "" for a home. Set once, before the member's first start.
	group string
	// sys holds the provider's own files of the home (home.log, home.ref):
	// dir when homes run as the gateway's user, else a folder of the
	// gateway's (DataDir/exec/<id>) that the home cannot write to.
	sys string
	log *homelog.Log
	// cgroup is the home's own cgroup directory; "" without cgroups.
	cgroup string
	// socket is the home's listening socket under socket activation, on
	// socketPort; nil until its first such start. Guarded by Provider.mu.
	socket     *os.File
	socketPort int
	// recMu orders the writes of the record of the home's process
	// (home.ref): a record of a process that was replaced meanwhile is
	// never written over its replacement's.
	recMu sync.Mutex
	// told orders what the provider reports of the home: a restart made
	// after a pause holds it from the new process's installation until
	// its report is out, and the supervisor takes it before it handles an
	// exit, so that the report of the new process's exit never comes
	// before the report that it runs.
	told sync.Mutex
	// orphans are the detached processes of the home a stop signalled
	// as the gateway's adopted children (ContainSubreaper), to be reaped.
	// Guarded by Provider.mu.
	orphans []int

	// Guarded by Provider.mu.
	wanted   bool        // the supervisor restarts the process when it exits
	proc     *proc       // the current process; nil when none is known
	failed   string      // why the supervisor gave up; "" when it did not
	restarts []time.Time // supervisor restarts inside the restart window
	// restarting is non-nil while the supervisor replaces proc; it is
	// closed when the replacement is installed or discarded. Operations
	// wait for it before they look at proc.
	restarting chan struct{}
	history    []provider.Restart // the supervisor's last restarts (history.go)
	// limits are those of the last process installed, kept once it has
	// ended: until a stop removes its cgroup, the usage of a home the
	// supervisor gave up on still names the memory_max that killed it.
	limits cgroup.Limits
}

// proc is one started or adopted process.
type proc struct {
	procid.Identity
	listenAt
	spec runSpec
	cmd  *exec.Cmd // nil when adopted: not a child of this gateway
	// started is when this provider started the process (zero when
	// adopted): for a while after, it may still exec its program.
	started time.Time
	// nextLook is the age at which refreshStarted next looks at the
	// program the process runs; guarded by Provider.mu.
	nextLook time.Duration
	// cgroup is the cgroup of this start, inside its home's; "" without
	// cgroups.
	cgroup string

	exited chan struct{} // closed by the watcher once the process is gone
	status string        // how it ended, e.g. "exit status 3"; set before exited closes
	// oomBase is its home's count of kills for its memory limit when it
	// started (-1: unknown): a higher count at its exit names the limit.
	oomBase int64
	// stopping is set when a stop begins: the members of the process's
	// group then get their own grace, and the watcher leaves them alone.
	stopping atomic.Bool

	// installed is set once the process has been made its home's
	// (h.proc); exitedEarly when its exit reached the supervisor before
	// that, and was set aside for the installer to hand back. Both are
	// guarded by Provider.mu.
	installed, exitedEarly bool
}

// exitEvent tells the supervisor that a watched process is gone.
type exitEvent struct {
	home *home
	proc *proc
}

// New checks cfg, fills its defaults, creates DataDir/homes and starts
// the provider's supervisor. A nil log discards. Close stops it.
func New(cfg Config, log *slog.Logger) (*Provider, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	dir := cfg.DataDir
	// data_dir/homes may be a link to the machine's folder of this
	// data_dir's homes (package homeuser), whose target homeuser.SetUp makes
	// again if it was removed.
	if st, lerr := os.Lstat(filepath.Join(dir, "homes")); lerr != nil || st.Mode()&fs.ModeSymlink == 0 {
		if err := os.MkdirAll(filepath.Join(dir, "homes"), 0o700); err != nil {
			return nil, fmt.Errorf("exec provider: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil && usesSelf(cfg.Command, cfg.VersionCommand) {
		return nil, fmt.Errorf("exec provider: {self}: %w", err)
	}
	// Nothing a home is not given reaches it: descriptors the gateway
	// inherited are closed at every exec (fds.go).
	if err := closeInheritedOnExec(); err != nil {
		return nil, fmt.Errorf("exec provider: %w", err)
	}
	us, err := homeuser.SetUp(homeuser.Params{Users: cfg.Users, DataDir: cfg.DataDir, MachineDir: cfg.MachineDir,
		Self: self, RunsSelf: runsSelf(cfg.Command, cfg.VersionCommand)})
	if err != nil {
		return nil, fmt.Errorf("exec provider: %w", err)
	}
	switch {
	case us.Refused != "":
		log.Error("exec: every home is refused: the gateway runs as root and cannot give homes users of their own",
			"cause", us.Refused)
	case us.Moved != "":
		log.Info("exec: laid out for homes of their own users", "what", us.Moved)
	}
	if cfg.Containment, err = ParseContainment(string(cfg.Containment)); err != nil {
		return nil, fmt.Errorf("exec provider: %w", err)
	}
	contain, err := chooseContainment(cfg.Containment, dir)
	if err != nil {
		return nil, fmt.Errorf("exec provider: %w", err)
	}
	if contain.mode == "" {
		log.Warn("exec: a home's processes that leave its process group are not stopped with it", "cause", contain.why,
			"hint", "run the gateway as root on a machine with cgroup v2")
	} else {
		log.Info("exec: containment of homes", "mode", string(contain.mode), "why", contain.why)
	}
	limits := setUpLimits(contain)
	cfg.Command = append([]string(nil), cfg.Command...)
	cfg.VersionCommand = append([]string(nil), cfg.VersionCommand...)
	cfg.Env = append([]string(nil), cfg.Env...)
	cfg.InheritEnv = append([]string(nil), cfg.InheritEnv...)
	e := &Provider{
		cfg:       cfg,
		log:       log,
		self:      us.Self,
		users:     us.Table,
		sharedWhy: us.Shared,
		refused:   us.Refused,
		homesDir:  us.Homes,
		contain:   contain,
		limits:    limits,
		client: provider.HomeClient(&http.Client{Transport: &http.Transport{
			Proxy:             nil, // homes are on loopback
			DialContext:       endpoint.Dialer(&net.Dialer{}),
			DisableKeepAlives: true,
		}}),
		exits:    make(chan exitEvent),
		done:     make(chan struct{}),
		homes:    make(map[string]*home),
		watchers: make(map[*os.File]struct{}),
	}
	e.wg.Add(2)
	go e.supervise()
	go e.tend()
	if contain.mode == ContainSubreaper {
		e.wg.Add(1)
		go e.reapAdopted()
	}
	return e, nil
}

// usesSelf reports whether a template names {self}.
func usesSelf(templates ...[]string) bool {
	for _, t := range templates {
		for _, a := range t {
			if strings.Contains(a, "{self}") {
				return true
			}
		}
	}
	return false
}

// Name returns "exec".
func (e *Provider) Name() string { return "exec" }

// Close stops the provider's own goroutines (supervisor, log janitor,
// watchers) and waits for them. It does not stop homes: they keep running
// so that the next gateway start adopts them. Every later call fails.
func (e *Provider) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		var running []homeProc
		for _, h := range e.homes {
			if p := h.proc; p != nil {
				running = append(running, homeProc{h, p})
			}
		}
		for f := range e.watchers {
			// Wakes the watcher's wait with a timeout error.
			_ = f.SetReadDeadline(time.Unix(1, 0))
		}
		e.mu.Unlock()
		// Homes that run on are adopted by the next start from their
		// records: those name the program each runs now.
		e.refreshAll(running)
		close(e.done)
		e.wg.Wait()
		e.client.CloseIdleConnections()
		// Empty cgroups go; those of homes that run on stay for the next
		// start, which adopts the homes.
		e.mu.Lock()
		ids := make([]string, 0, len(e.homes))
		for _, h := range e.homes {
			cgroup.Remove(h.cgroup)
			ids = append(ids, h.id)
		}
		e.closeSocketsLocked()
		e.mu.Unlock()
		e.limits.RemoveHomes(ids)
		cgroup.Remove(e.contain.root)
	})
	return nil
}

// homeFor returns the provider's record of home id, creating it.
func (e *Provider) homeFor(id string) (*home, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\x00") || len(id) > 200 {
		return nil, fmt.Errorf("home id %q is not a valid directory name", id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	h := e.homes[id]
	if h == nil {
		dir := filepath.Join(e.homesDir, id)
		sys := dir
		if e.users != nil {
			sys = filepath.Join(e.cfg.DataDir, "exec", id)
		}
		h = &home{id: id, dir: dir, sys: sys, log: homelog.New(filepath.Join(sys, "home.log"), e.cfg.LogMaxBytes),
			cgroup: e.contain.cgroupDir(id)}
		e.homes[id] = h
	}
	return h, nil
}

// owner is the home whose user h's processes run as: its group's for a
// member.
func (h *home) owner() string {
	if h.group != "" {
		return h.group
	}
	return h.id
}

// settled waits until no supervisor restart of h is in flight and runs fn
// with e.mu held, in the same critical section that saw no restart. It
// never returns with e.mu held, whatever the path: fn runs under a
// deferred unlock.
func (e *Provider) settled(ctx context.Context, h *home, fn func()) error {
	for {
		ch, err := e.trySettled(h, fn)
		if err != nil || ch == nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return errClosed
		}
	}
}

// trySettled runs fn with e.mu held if no restart of h is in flight, or
// returns the channel of the restart in flight (fn not run).
func (e *Provider) trySettled(h *home, fn func()) (<-chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	if ch := h.restarting; ch != nil {
		return ch, nil
	}
	fn()
	return nil, nil
}

// note writes one line of the provider's own into the home's log.
func (e *Provider) note(h *home, format string, args ...any) {
	line := time.Now().UTC().Format(time.RFC3339) + " " + fmt.Sprintf(format, args...) + "\n"
	if _, err := h.log.Write([]byte(line)); err != nil {
		e.log.Warn("exec: writing home log", "home", h.id, "err", err)
	}
}
