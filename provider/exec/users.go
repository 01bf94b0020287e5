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
// time: the lowest uid of the range that no home has and no account of
// the system names.
func (t *userTable) uidFor(id string) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.homes[id]; ok {
		return uid, nil
	}
	taken := make(map[uint32]bool, len(t.homes))
	for _, uid := range t.homes {
		taken[uid] = true
	}
	for uid := t.first; uid >= t.first && uid <= t.last; uid++ {
		if taken[uid] || systemAccount(uid) {
			continue
		}
		t.homes[id] = uid
		if err := t.save(); err != nil {
			delete(t.homes, id)
			return 0, err
		}
		return uid, nil
	}
	return 0, fmt.Errorf("no free uid left in %d-%d for home %s: widen exec.users.range", t.first, t.last, id)
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

// runsSelf reports whether a template's program is {self}.
func runsSelf(templates ...[]string) bool {
	for _, t := range templates {
		if len(t) > 0 && strings.Contains(t[0], "{self}") {
			return true
		}
	}
	return false
}

// setUpUsers decides whether each home runs as a user of its own, from
// cfg.Users and what the machine allows; it prepares data_dir for it (the
// gateway's files stay unreadable to homes: data_dir and data_dir/homes
// 0711, data_dir/exec 0700). It returns the table, or nil and the reason
// homes share the gateway's user.
func setUpUsers(cfg Config, self string) (*userTable, string, error) {
	mode := cfg.Users.Mode
	if mode == "" || mode == UsersOff {
		return nil, "exec.users.mode is off", nil
	}
	if mode != UsersAuto && mode != UsersDynamic {
		return nil, "", fmt.Errorf("users mode %q: want off, auto or dynamic", mode)
	}
	first, last := cfg.Users.First, cfg.Users.Last
	if first == 0 && last == 0 {
		first, last = DefaultUsersFirst, DefaultUsersLast
	}
	if first == 0 || first > last {
		return nil, "", fmt.Errorf("users range %d-%d: want FIRST-LAST with 0 < FIRST <= LAST", first, last)
	}
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = fmt.Sprintf("the gateway runs as uid %d, not root, so it cannot start homes as other users", os.Geteuid())
	default:
		if d := unreachable(cfg.DataDir, false); d != "" {
			why = fmt.Sprintf("%s closed to other users, so a home's user could not reach its folder under %s: "+
				"chmod o+x %s (or move data_dir)", d, cfg.DataDir, d)
		} else if runsSelf(cfg.Command, cfg.VersionCommand) {
			if p := unreachable(self, true); p != "" {
				why = fmt.Sprintf("%s closed to other users, so a home's user could not run {self} (%s): "+
					"chmod o+x %s (or install wakegate where every user may run it)", p, self, p)
			}
		}
	}
	if why != "" {
		if mode == UsersDynamic {
			return nil, "", fmt.Errorf("users mode dynamic: %s", why)
		}
		return nil, why, nil
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{cfg.DataDir, 0o711}, {filepath.Join(cfg.DataDir, "homes"), 0o711}, {filepath.Join(cfg.DataDir, "exec"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return nil, "", fmt.Errorf("home users: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return nil, "", fmt.Errorf("home users: %w", err)
		}
	}
	t, err := openUserTable(filepath.Join(cfg.DataDir, "exec", usersFile), first, last)
	if err != nil {
		return nil, "", err
	}
	return t, "", nil
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
