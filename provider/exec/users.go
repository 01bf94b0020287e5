package execprov

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
	"github.com/wakegate/wakegate/provider/exec/members"
)

// Users says which user a home's processes run as (package homeuser).
type Users = homeuser.Users

// Modes of Users.Mode.
const (
	// UsersOff runs every home as the gateway's own user.
	UsersOff = homeuser.Off
	// UsersAuto gives each home a user of its own when the gateway can
	// arrange it, and otherwise runs homes as the gateway's user and says
	// why (Provider.SharedUser).
	UsersAuto = homeuser.Auto
	// UsersDynamic gives each home a user of its own, or refuses to start.
	UsersDynamic = homeuser.Dynamic
)

// Default uid range of Users: the one systemd leaves to dynamic users.
const (
	DefaultUsersFirst = homeuser.DefaultFirst
	DefaultUsersLast  = homeuser.DefaultLast
)

// HomeOptions are an exec home's options.
type HomeOptions struct {
	// User is an account of the system the home runs as, instead of the
	// uid exec.users hands it: for a home that needs a known user (its
	// files elsewhere, a sudoers rule). Needs exec.users auto or dynamic
	// under a root gateway; never root. Default: the handed uid.
	User string `json:"user,omitempty"`
	// SocketActivation starts this home with socket activation (see
	// Config.SocketActivation), or without it. Default: the
	// provider's.
	SocketActivation *bool `json:"socket_activation,omitempty"`
	// MemoryMax caps the memory of all the home's processes together, in
	// bytes (a number, or a string such as "256MiB"): past it the kernel
	// reclaims, then kills a process of the home, and the exit is reported
	// with the limit. Needs a cgroup per home with the memory controller
	// (cgroup v2, or the v1 memory hierarchy of a hybrid machine); refused
	// where the machine has none. Default (zero): no limit.
	MemoryMax MemorySize `json:"memory_max,omitempty"`
	// CPUMax caps the CPU time of all the home's processes together, in
	// cores: 0.5 is half of one core (50 ms in each 100 ms), 2 is two
	// cores. A home past it is throttled (its usage says how often). Needs
	// a cgroup per home with the cpu controller (v2, or the v1 cpu
	// hierarchy); refused where the machine has none. Default (zero): no
	// limit.
	CPUMax float64 `json:"cpu_max,omitempty"`
	// PidsMax caps how many processes and threads the home may have at
	// once (see Config.PidsMax). Default (zero): the provider's;
	// negative: no cap.
	PidsMax int `json:"pids_max,omitempty"`
	// Members make the home a group of processes (package members): each
	// a name, a command, optional env, working_dir, probe and depends_on,
	// and exactly one the entry, which the gateway forwards to. The user
	// and limits above apply to every member, each member's processes
	// counted on their own. Default none: the home is one process.
	Members []members.Member `json:"members,omitempty"`
}

// homeUser is the user option of a home's options; "" when none (or
// unreadable: CheckHome refused those).
func homeUser(opts []byte) string {
	var o HomeOptions
	if provider.DecodeOptions(opts, &o) != nil {
		return ""
	}
	return o.User
}

// userOf is how h's processes run: as account name when set, else as the
// uid exec.users handed h; nil for the gateway's own user.
func (e *Provider) userOf(h *home, name string) (*syscall.Credential, error) {
	if e.refused != "" {
		return nil, fmt.Errorf("home %s is refused, not run as root: %s", h.id, e.refused)
	}
	if name != "" {
		if e.users == nil {
			return nil, fmt.Errorf("home runs as user %q, which needs exec.users auto or dynamic under a root gateway: %s", name, e.sharedWhy)
		}
		uid, gid, err := homeuser.Lookup(name)
		if err != nil {
			return nil, err
		}
		return homeuser.Credential(uid, gid), nil
	}
	if e.users == nil {
		return nil, nil
	}
	uid, err := e.users.UIDFor(h.owner())
	if err != nil {
		return nil, err
	}
	return homeuser.Credential(uid, uid), nil
}

// ClosedToOthers returns what on the way to path (its parent folders,
// outermost first, and path itself when it is a program) a user other
// than the owner cannot pass or run, space-separated; "" when nothing: a
// home with a user of its own cannot run a program for which it says
// something.
func ClosedToOthers(path string, program bool) string { return homeuser.ClosedToOthers(path, program) }

// runsSelf reports whether a template's program is {self}.
func runsSelf(templates ...[]string) bool {
	for _, t := range templates {
		if len(t) > 0 && strings.Contains(t[0], "{self}") {
			return true
		}
	}
	return false
}

// tmpDir is the TMPDIR of h's processes.
func (e *Provider) tmpDir(h *home) string {
	if e.users != nil {
		return filepath.Join(h.dir, homeuser.TmpDir)
	}
	return os.TempDir()
}

// SharedUser says why homes run as the gateway's own user, where they do:
// a home can then read what the gateway's user can (its store, its secret
// files, other homes' folders) and signal the gateway. "" when each home
// runs as a user of its own, or when exec.users is off on purpose.
func (e *Provider) SharedUser() string { return e.sharedWhy }

// RefusedHomes says why this root gateway refuses every exec home (it
// could not give them users of their own, and never runs one as root
// unless exec.users.mode is off); "" when it does not.
func (e *Provider) RefusedHomes() string { return e.refused }

// ProgramClosed implements provider.UserIsolation: under a user per home,
// the program of s's command, found on the PATH the home gets as a start
// would find it, and what on the way to it other users cannot pass or
// run (a program in root's home folder, such as a version manager's shim,
// is the usual case). A home with a user of its own setting, a program
// named by a placeholder, or one not found (the start says so) is not
// judged.
func (e *Provider) ProgramClosed(s provider.Spec) (program, closed string) {
	sp := e.specFor(s)
	if e.users == nil || sp.user != "" || len(sp.command) == 0 || strings.Contains(sp.command[0], "{") {
		return "", ""
	}
	path, err := exec.LookPath(sp.command[0])
	if err != nil {
		return "", ""
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", ""
	}
	if c := homeuser.ClosedToOthers(path, true); c != "" {
		return path, c
	}
	return "", ""
}

var _ provider.UserIsolation = (*Provider)(nil)
