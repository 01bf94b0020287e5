package execprov

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/wakegate/wakegate/internal/homesdir"
	"github.com/wakegate/wakegate/provider"
)

// Modes of Users.Mode.
const (
	// UsersOff runs every home as the gateway's own user.
	UsersOff = "off"
	// UsersAuto gives each home a user of its own when the gateway can
	// arrange it (it runs as root and the paths a home needs are reachable
	// to other users), and otherwise runs homes as the gateway's user and
	// says why (Provider.SharedUser).
	UsersAuto = "auto"
	// UsersDynamic gives each home a user of its own, or refuses to start.
	UsersDynamic = "dynamic"
)

// Default uid range of Users: the one systemd leaves to dynamic users.
const (
	DefaultUsersFirst uint32 = 61184
	DefaultUsersLast  uint32 = 65519
)

// Users says which user a home's processes run as.
type Users struct {
	// Mode is UsersOff (and when empty), UsersAuto or UsersDynamic.
	Mode string
	// First and Last bound the uids handed to homes, inclusive; a home's
	// gid is its uid. A uid is allocated to a home the first time it
	// starts, recorded in DataDir/exec/users.json, and never handed to
	// another home, even after the home is removed (its folder and files
	// may remain). A uid that names an account of the system is skipped.
	// Default (both zero): DefaultUsersFirst-DefaultUsersLast.
	First, Last uint32
}

// usersFile records which uid each home has, in DataDir/exec.
const usersFile = "users.json"

// userTable hands each home a uid of its own from a range and records it,
// so that a home keeps its uid across restarts and no two homes share one.
type userTable struct {
	path        string
	first, last uint32
	// registry is the machine-wide record of uids every gateway of the
	// machine hands out; dataDir is this gateway's, as recorded there.
	registry *uidRegistry
	dataDir  string

	mu    sync.Mutex
	homes map[string]uint32
}

// usersRecord is the form of the users file.
type usersRecord struct {
	Homes map[string]uint32 `json:"homes"`
}

// openUserTable reads the table at path (none yet is an empty table). A
// file that cannot be read or trusted (undecodable, a uid given to two
// homes, a uid of root) is refused with the way out.
func openUserTable(path string, first, last uint32) (*userTable, error) {
	t := &userTable{path: path, first: first, last: last, homes: map[string]uint32{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("home users: %w", err)
	}
	var rec usersRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("home users: %s is not readable (%v): restore it from a backup; "+
			"removing it gives every home a new uid, and files a home wrote keep the old one", path, err)
	}
	seen := map[uint32]string{}
	for id, uid := range rec.Homes {
		if uid == 0 {
			return nil, fmt.Errorf("home users: %s gives home %s uid 0: fix or remove that entry", path, id)
		}
		if other, dup := seen[uid]; dup {
			return nil, fmt.Errorf("home users: %s gives uid %d to homes %s and %s: give one of them another uid", path, uid, other, id)
		}
		seen[uid] = id
		t.homes[id] = uid
	}
	return t, nil
}

// uidFor returns home id's uid, allocating and recording one the first
// time: the lowest uid of the range that no home of any gateway of the
// machine has (uidRegistry.allocate), no account of the system names and
// no live process runs as.
func (t *userTable) uidFor(id string) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.homes[id]; ok {
		return uid, nil
	}
	if t.registry == nil {
		return 0, fmt.Errorf("home %s: no uid registry", id)
	}
	uid, err := t.registry.allocate(t.dataDir, id, t.first, t.last)
	if err != nil {
		return 0, err
	}
	t.homes[id] = uid
	if err := t.save(); err != nil {
		delete(t.homes, id)
		return 0, err
	}
	return uid, nil
}

// save writes the table atomically; t.mu is held.
func (t *userTable) save() error {
	b, err := json.MarshalIndent(usersRecord{Homes: t.homes}, "", "  ")
	if err != nil {
		return fmt.Errorf("home users: %w", err)
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("home users: %w", err)
	}
	if err := os.Rename(tmp, t.path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("home users: %w", err)
	}
	return nil
}

// systemAccount reports whether uid names a user or group of the system.
func systemAccount(uid uint32) bool {
	s := strconv.FormatUint(uint64(uid), 10)
	if _, err := user.LookupId(s); err == nil {
		return true
	}
	_, err := user.LookupGroupId(s)
	return err == nil
}

// credential is how a process of a home runs: uid and gid, and no
// supplementary group.
func credential(uid, gid uint32) *syscall.Credential {
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
}

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

// lookupHomeUser finds the uid and gid of account name, which must not
// be root.
func lookupHomeUser(name string) (uid, gid uint32, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: %w", name, err)
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("user %q has uid %q gid %q: not numbers", name, u.Uid, u.Gid)
	}
	if id == 0 || g == 0 {
		return 0, 0, fmt.Errorf("user %q is root (uid %d gid %d): a home never runs as root", name, id, g)
	}
	return uint32(id), uint32(g), nil
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
		uid, gid, err := lookupHomeUser(name)
		if err != nil {
			return nil, err
		}
		return credential(uid, gid), nil
	}
	if e.users == nil {
		return nil, nil
	}
	uid, err := e.users.uidFor(h.id)
	if err != nil {
		return nil, err
	}
	return credential(uid, uid), nil
}

// unreachable returns what on the way to path (its parent directories,
// outermost first, and path itself when it is a program) a user other
// than the owner cannot pass or run, space-separated; "" when nothing.
func unreachable(path string, program bool) string {
	var closed []string
	if program {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm()&0o001 == 0 {
			closed = append(closed, path)
		}
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm()&0o001 == 0 {
			closed = append([]string{dir}, closed...)
		}
		if filepath.Dir(dir) == dir {
			return strings.Join(closed, " ")
		}
	}
}

// ClosedToOthers returns what on the way to path (its parent folders,
// outermost first, and path itself when it is a program) a user other
// than the owner cannot pass or run, space-separated; "" when nothing: a
// home with a user of its own cannot run a program for which it says
// something.
func ClosedToOthers(path string, program bool) string { return unreachable(path, program) }

// runsSelf reports whether a template's program is {self}.
func runsSelf(templates ...[]string) bool {
	for _, t := range templates {
		if len(t) > 0 && strings.Contains(t[0], "{self}") {
			return true
		}
	}
	return false
}

// userSetup is what setUpUsers decided.
type userSetup struct {
	// table hands each home a uid of its own; nil when homes run as the
	// gateway's user (for the reason shared) or are refused (refused).
	table *userTable
	// shared says why homes run as the gateway's user, where they do.
	shared string
	// refused says why a root gateway runs no home: it could not give
	// them users of their own, and never runs one as root unless
	// exec.users.mode is off.
	refused string
	// homes is the folder of the home folders: data_dir/homes, or its
	// place under Config.MachineDir (machineHomes).
	homes string
	// self is {self} as homes run it: the gateway's executable, or its
	// copy under Config.MachineDir (machineSelf).
	self string
	// moved says what was laid out under Config.MachineDir and why; ""
	// when nothing was.
	moved string
}

// setUpUsers decides whether each home runs as a user of its own, from
// cfg.Users and what the machine allows, and prepares for it. A root
// gateway never falls back to running homes as root (design rule 34):
// where data_dir lies under a folder other users cannot pass, the home
// folders are laid out under cfg.MachineDir (machineHomes), and where
// they cannot run the gateway's binary ({self}), they run a copy of it
// there (machineSelf); when even that fails, mode auto refuses every home
// (userSetup.refused) and mode dynamic refuses to start. data_dir and
// data_dir/homes become 0711 and data_dir/exec 0700, so the gateway's
// files stay unreadable to homes.
func setUpUsers(cfg Config, self string) (userSetup, error) {
	us := userSetup{homes: filepath.Join(cfg.DataDir, "homes"), self: self}
	mode := cfg.Users.Mode
	if mode == "" || mode == UsersOff {
		us.shared = "exec.users.mode is off"
		return us, nil
	}
	if mode != UsersAuto && mode != UsersDynamic {
		return us, fmt.Errorf("users mode %q: want off, auto or dynamic", mode)
	}
	first, last := cfg.Users.First, cfg.Users.Last
	if first == 0 && last == 0 {
		first, last = DefaultUsersFirst, DefaultUsersLast
	}
	if first == 0 || first > last {
		return us, fmt.Errorf("users range %d-%d: want FIRST-LAST with 0 < FIRST <= LAST", first, last)
	}
	if os.Geteuid() != 0 {
		why := fmt.Sprintf("the gateway runs as uid %d, not root, so it cannot start homes as other users", os.Geteuid())
		if mode == UsersDynamic {
			return us, fmt.Errorf("users mode dynamic: %s", why)
		}
		us.shared = why
		return us, nil
	}
	machine := cfg.MachineDir
	if machine == "" {
		machine = homesdir.DefaultMachineDir
	}
	var moved []string
	refuse := func(what string, err error, fix string) (userSetup, error) {
		why := fmt.Sprintf("%s, and %v: %s, or set exec.users.mode off to run homes as root on purpose", what, err, fix)
		if mode == UsersDynamic {
			return us, fmt.Errorf("users mode dynamic: %s", why)
		}
		us.refused = why
		return us, nil
	}
	if d := unreachable(cfg.DataDir, false); d != "" {
		dir, err := machineHomes(machine, cfg.DataDir)
		if err == nil {
			if c := unreachable(filepath.Join(dir, "x"), false); c != "" {
				err = fmt.Errorf("%s is closed to other users", c)
			}
		}
		if err != nil {
			return refuse(fmt.Sprintf("%s is closed to other users, so a home's user could not reach its folder under %s", d, cfg.DataDir),
				err, fmt.Sprintf("chmod o+x %s, or move data_dir, or fix exec.users.machine_dir (%s)", d, machine))
		}
		us.homes = dir
		moved = append(moved, fmt.Sprintf("home folders in %s (data_dir/homes links there), because %s is closed to other users", dir, d))
	}
	if runsSelf(cfg.Command, cfg.VersionCommand) {
		if p := unreachable(self, true); p != "" {
			cp, err := machineSelf(machine, self)
			if err == nil {
				if c := unreachable(cp, true); c != "" {
					err = fmt.Errorf("%s is closed to other users", c)
				}
			}
			if err != nil {
				return refuse(fmt.Sprintf("%s is closed to other users, so a home's user could not run {self} (%s)", p, self),
					err, fmt.Sprintf("chmod o+x %s, or install wakegate where every user may run it", p))
			}
			us.self = cp
			moved = append(moved, fmt.Sprintf("{self} runs as %s, because %s is closed to other users", cp, p))
		}
	}
	us.moved = strings.Join(moved, "; ")
	dirs := []struct {
		path string
		mode os.FileMode
	}{{cfg.DataDir, 0o711}, {filepath.Join(cfg.DataDir, "exec"), 0o700}}
	if us.homes == filepath.Join(cfg.DataDir, "homes") {
		dirs = append(dirs, struct {
			path string
			mode os.FileMode
		}{us.homes, 0o711})
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return us, fmt.Errorf("home users: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return us, fmt.Errorf("home users: %w", err)
		}
	}
	if err := ensureRootDir(machine, 0o711); err != nil {
		return refuse("the uids of homes are registered machine-wide in "+machine, err, "fix exec.users.machine_dir ("+machine+")")
	}
	t, err := openUserTable(filepath.Join(cfg.DataDir, "exec", usersFile), first, last)
	if err != nil {
		return us, err
	}
	t.registry, t.dataDir = &uidRegistry{dir: machine}, cfg.DataDir
	if err := t.registry.claim(cfg.DataDir, t.homes); err != nil {
		return us, err
	}
	us.table = t
	return us, nil
}

// prepareFolder makes h's folder (and its TMPDIR, .tmp inside it) belong
// to uid and gid with mode 0700. A folder that another user owns (a home
// started before homes had users of their own) is handed over whole, once:
// no process of uid runs in it yet, so nothing in it moves under the walk.
func prepareFolder(h *home, uid, gid uint32) error {
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	st, err := os.Lstat(h.dir)
	if err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok {
		return fmt.Errorf("home dir %s is not a directory", h.dir)
	}
	if sys.Uid != uid || sys.Gid != gid {
		err := filepath.WalkDir(h.dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(uid), int(gid))
		})
		if err != nil {
			return fmt.Errorf("home dir: giving it to uid %d: %w", uid, err)
		}
	}
	if err := os.Chmod(h.dir, 0o700); err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	tmp := filepath.Join(h.dir, homeTmp)
	switch err := os.Mkdir(tmp, 0o700); {
	case err == nil:
		// Lchown: the name is in a folder uid writes to.
		if err := os.Lchown(tmp, int(uid), int(gid)); err != nil {
			return fmt.Errorf("home tmp: %w", err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("home tmp: %w", err)
	}
	return nil
}

// homeTmp is a home's TMPDIR inside its folder, when it has a user of its
// own: the system's /tmp is shared by every user.
const homeTmp = ".tmp"

// tmpDir is the TMPDIR of h's processes.
func (e *Provider) tmpDir(h *home) string {
	if e.users != nil {
		return filepath.Join(h.dir, homeTmp)
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
	if c := unreachable(path, true); c != "" {
		return path, c
	}
	return "", ""
}

var _ provider.UserIsolation = (*Provider)(nil)
