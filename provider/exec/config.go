package execprov

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// Config configures the exec provider, which runs each home as a local
// process. New fills the defaults once; zero values below mean "the
// default" unless said otherwise.
type Config struct {
	// Command is the command template, program first. In every argument
	// the placeholders {port} (the loopback port the home must listen on),
	// {target}, {version}, {data_dir} (the home's own directory), {id} and
	// {self} (the gateway's own executable, os.Executable()) are replaced
	// ({endpoint}, http://127.0.0.1:{port}, too). A command that names
	// {socket} listens on a Unix socket instead of a port: {socket} is
	// the absolute path {data_dir}/.wakegate.sock (at most 107 bytes),
	// {endpoint} is then unix://{socket}, no port is chosen, and the
	// gateway reaches the home only through that socket, which only the
	// home's user and root can connect to when homes have users of their
	// own. Required. The program is
	// {self}, an absolute path or a name on PATH. Spec.Command overrides the
	// template for one Wake or Recreate, and the supervisor restarts a
	// process with the template it was started from. The program may be a
	// wrapper that execs the real one (env, a version manager's shim,
	// `sh -c 'exec ...'`): the process identity is its pid, start time and
	// boot, which an exec keeps. A wrapper that forks instead leaves its
	// children in the home's process group, which a stop ends too.
	Command []string
	// DataDir is the root data directory. Each home gets DataDir/homes/<id>/
	// (created 0700), which is {data_dir}, HOME and the home's working
	// directory, and where its log (home.log) and the provider's record of
	// its last process (home.ref) live, unless homes have users of their
	// own: those two are then in DataDir/exec/<id>/, which the home cannot
	// write to. Required; made absolute.
	DataDir string
	// Env is extra KEY=VALUE entries for each home and for VersionCommand.
	// A home's environment is built from nothing (see homeEnv): it never
	// inherits the gateway's, which holds the gateway's secrets. Empty:
	// none beyond what homeEnv defines.
	Env []string
	// InheritEnv names variables of the gateway's environment passed to
	// each home and VersionCommand as they are (an unset one is left
	// out), on purpose. Empty: none.
	InheritEnv []string
	// Users says which user a home's processes run as: one of their own
	// per home (see Users), or the gateway's. Zero: the gateway's.
	Users Users
	// MachineDir is the machine-wide folder of root gateways whose homes
	// have users of their own (see package homeuser): the registry of the uids
	// every gateway of the machine hands out, the home folders of a
	// data_dir other users cannot pass, and the copy of {self} homes run
	// when other users cannot run the gateway's own binary. Default
	// (empty): /var/lib/wakegate.
	MachineDir string
	// PidsMax caps how many processes (and threads) each home may have
	// at once, all its processes together; a fork past it fails with
	// EAGAIN and the gateway and other homes are untouched. It is the
	// pids controller of the home's cgroup (v2, or the v1 pids hierarchy)
	// where the home has one, and otherwise RLIMIT_NPROC of its first
	// process, which counts every process of the home's own uid (only
	// where it has one). A home's option pids_max overrides it. Default
	// (zero): 1024; negative: no cap.
	PidsMax int
	// LogMaxBytes caps the per-home log <homedir>/home.log (the home's
	// stdout and stderr), in bytes. When full it is rotated to home.log.1
	// (one old file kept). Default (zero) 1 MiB. The cap is enforced every
	// second, so the log can overshoot it by what the home writes meanwhile.
	LogMaxBytes int64
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL, and
	// then again for the killed process to be gone. Default (zero) 5s.
	StopGrace time.Duration
	// RestartBudget is how many restarts after unexpected exits are allowed
	// per RestartWindow before the home is marked failed. Default (zero) 3;
	// negative: never restart (fail at the first unexpected exit).
	RestartBudget int
	// RestartWindow is the sliding window RestartBudget counts in. Default
	// (zero) 60s.
	RestartWindow time.Duration
	// RestartPause is the pause before restarting a process that exited
	// within restartSettle of its start, doubled for each restart already
	// counted in RestartWindow, up to maxRestartPause (supervise.go).
	// Default (zero) 100ms; negative: no pause.
	RestartPause time.Duration
	// VersionCommand, when set, is a command template (the placeholders of
	// Command plus {endpoint}) whose trimmed stdout is the version the home
	// really runs. Empty (default): GET {endpoint}/version, whose trimmed
	// body is the version.
	VersionCommand []string
	// SuspendSignal, when true, makes Suspend send SIGSTOP to the home's
	// process group and Wake resume it with SIGCONT. False (default):
	// Suspend returns ErrUnsupported and the caller stops the home instead.
	SuspendSignal bool
	// SocketActivation starts every home, unless its option
	// socket_activation says otherwise, with systemd's socket activation:
	// the provider binds the home's loopback port itself and passes the
	// listening socket as descriptor 3 (LISTEN_FDS=1, LISTEN_PID,
	// LISTEN_FDNAMES=http), keeps it across stops so the port never
	// changes, and the home is reachable the moment it is started.
	// LISTEN_PID is written by a traced start (listenpid.go), or by /bin/sh
	// where tracing is refused. Not for {socket} commands. False (default):
	// the home binds {port} itself.
	SocketActivation bool
	// Containment says how every process a home starts is found and
	// stopped with it, however it detached: a cgroup per home, or the
	// gateway as a child subreaper (see Containment). Zero: ContainAuto,
	// a cgroup per home where the gateway may create one.
	Containment Containment
	// OnChange, when set, is called from the provider's supervisor
	// goroutine, never while a lock of the provider is held, when a home's
	// process exited unexpectedly and was restarted (the new Result: new
	// endpoint and ref to persist) or when the provider gave up on it
	// (State failed; Reason gives the exit status and the last lines of
	// its log). It should return quickly: the supervisor waits for it.
	// Nil: nobody is told.
	OnChange func(id string, r provider.Result)
	// MayRestart, when set, is asked (with no lock of the provider held)
	// before the supervisor restarts a home whose process exited by
	// itself. False: the gateway no longer holds the home in its fleet;
	// the supervisor stops watching it without a restart or a report, and
	// only a later Wake, Recreate or Stop acts on it again. Nil: always.
	MayRestart func(id string) bool
}

// Defaults of Config.
const (
	defaultLogMaxBytes   = 1 << 20
	defaultStopGrace     = 5 * time.Second
	defaultRestartBudget = 3
	defaultRestartWindow = 60 * time.Second
	defaultRestartPause  = 100 * time.Millisecond
)

// fill checks cfg and fills its defaults, once: the rest of the provider
// reads the values as they are. DataDir is made absolute.
func (cfg *Config) fill() error {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return errors.New("exec provider: command is required")
	}
	if cfg.DataDir == "" {
		return errors.New("exec provider: data_dir is required")
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("exec provider: env entry %q is not KEY=VALUE", kv)
		}
	}
	if err := checkInheritEnv(cfg.InheritEnv); err != nil {
		return fmt.Errorf("exec provider: %w", err)
	}
	switch {
	case cfg.LogMaxBytes < 0:
		return fmt.Errorf("exec provider: log_max_bytes %d is negative", cfg.LogMaxBytes)
	case cfg.StopGrace < 0:
		return fmt.Errorf("exec provider: stop_grace %s is negative", cfg.StopGrace)
	case cfg.RestartWindow < 0:
		return fmt.Errorf("exec provider: restart_window %s is negative", cfg.RestartWindow)
	}
	if cfg.LogMaxBytes == 0 {
		cfg.LogMaxBytes = defaultLogMaxBytes
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = defaultStopGrace
	}
	if cfg.RestartBudget == 0 {
		cfg.RestartBudget = defaultRestartBudget
	} else if cfg.RestartBudget < 0 {
		cfg.RestartBudget = 0
	}
	if cfg.RestartWindow == 0 {
		cfg.RestartWindow = defaultRestartWindow
	}
	if cfg.RestartPause == 0 {
		cfg.RestartPause = defaultRestartPause
	} else if cfg.RestartPause < 0 {
		cfg.RestartPause = 0
	}
	if cfg.PidsMax == 0 {
		cfg.PidsMax = DefaultPidsMax
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("exec provider: data_dir: %w", err)
	}
	cfg.DataDir = dir
	return nil
}
