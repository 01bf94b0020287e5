package homeuser

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/wakegate/wakegate/internal/homesdir"
	"github.com/wakegate/wakegate/internal/sysfile"
)

// Modes of Users.Mode.
const (
	// Off runs every home as the gateway's own user.
	Off = "off"
	// Auto gives each home a user of its own when the gateway can
	// arrange it (it runs as root and the paths a home needs are reachable
	// to other users), and otherwise runs homes as the gateway's user and
	// says why (the exec provider's SharedUser).
	Auto = "auto"
	// Dynamic gives each home a user of its own, or refuses to start.
	Dynamic = "dynamic"
)

// Default uid range of Users: the one systemd leaves to dynamic users.
const (
	DefaultFirst uint32 = 61184
	DefaultLast  uint32 = 65519
)

// Users says which user a home's processes run as.
type Users struct {
	// Mode is Off (and when empty), Auto or Dynamic.
	Mode string
	// First and Last bound the uids handed to homes, inclusive; a home's
	// gid is its uid. A uid is allocated to a home the first time it
	// starts, recorded in DataDir/exec/users.json, and never handed to
	// another home, even after the home is removed (its folder and files
	// may remain). A uid that names an account of the system is skipped.
	// Default (both zero): DefaultFirst-DefaultLast.
	First, Last uint32
}

// File records which uid each home has, in DataDir/exec.
const File = "users.json"

// Table hands each home a uid of its own from a range and records it,
// so that a home keeps its uid across restarts and no two homes share one.
type Table struct {
	path        string
	first, last uint32
	// registry is the machine-wide record of uids every gateway of the
	// machine hands out; dataDir is this gateway's, as recorded there.
	registry *uidRegistry
	dataDir  string

	mu    sync.Mutex
	homes map[string]uint32
	// names are the names of homes in order, for the users file: kept
	// as each pass adds its homes, so that a pass sorts none, and made
	// again from homes when they differ in length.
	names []string
	// pending are the homes waiting for a uid while another caller
	// allocates (allocating): they are served together by the next pass.
	pending    *uidBatch
	allocating bool
}

// uidBatch is the homes one pass of UIDFor allocates uids to together,
// and its outcome, set before done closes.
type uidBatch struct {
	ids  []string
	done chan struct{}
	errs map[string]error
}

// usersRecord is the form of the users file.
type usersRecord struct {
	Homes map[string]uint32 `json:"homes"`
}

// openTable reads the table at path (none yet is an empty table). A
// file that cannot be read or trusted (undecodable, a uid given to two
// homes, a uid of root) is refused with the way out.
func openTable(path string, first, last uint32) (*Table, error) {
	t := &Table{path: path, first: first, last: last, homes: map[string]uint32{}}
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

// UIDFor returns home id's uid, allocating and recording one the first
// time: the lowest uid of the range that no home of any gateway of the
// machine has (uidRegistry.allocate), no account of the system names and
// no live process runs as.
//
// Homes that first start at the same moment (a storm of first wakes) are
// served together: while one pass of the registry runs, the homes that
// ask wait for the next, which reads and writes the registry and the
// users file once for all of them. One pass costs about as much as one
// home's allocation (it reads the whole registry and every process of the
// machine), so n homes at once cost a few passes, not n.
func (t *Table) UIDFor(id string) (uint32, error) {
	t.mu.Lock()
	if uid, ok := t.homes[id]; ok {
		t.mu.Unlock()
		return uid, nil
	}
	if t.registry == nil {
		t.mu.Unlock()
		return 0, fmt.Errorf("home %s: no uid registry", id)
	}
	if t.pending == nil {
		t.pending = &uidBatch{done: make(chan struct{})}
	}
	b := t.pending
	b.ids = append(b.ids, id)
	if !t.allocating {
		// This caller runs the passes until no home waits.
		t.allocating = true
		for t.pending != nil {
			next := t.pending
			t.pending = nil
			// A home served by the pass before (asked again meanwhile)
			// keeps its uid.
			var ids []string
			for _, id := range next.ids {
				if _, ok := t.homes[id]; !ok {
					ids = append(ids, id)
				}
			}
			t.mu.Unlock()
			var uids map[string]uint32
			var errs map[string]error
			if len(ids) > 0 {
				uids, errs = t.registry.allocate(t.dataDir, ids, t.first, t.last)
			}
			t.mu.Lock()
			t.record(next, uids, errs)
		}
		t.allocating = false
	}
	t.mu.Unlock()
	<-b.done
	if err := b.errs[id]; err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.homes[id], nil
}

// record keeps the uids one pass allocated to b's homes and writes the
// users file, and completes b: a home without a uid gets its error; when
// the file cannot be written, every home of b gets that error and keeps
// no uid. t.mu is held.
func (t *Table) record(b *uidBatch, uids map[string]uint32, errs map[string]error) {
	defer close(b.done)
	b.errs = errs
	if len(uids) == 0 {
		return
	}
	for id, uid := range uids {
		if _, had := t.homes[id]; !had && len(t.names) == len(t.homes) {
			i, _ := slices.BinarySearch(t.names, id)
			t.names = slices.Insert(t.names, i, id)
		}
		t.homes[id] = uid
	}
	if err := t.save(); err != nil {
		for id := range uids {
			delete(t.homes, id)
			b.errs[id] = err
		}
		t.names = nil
	}
}

// save writes the table atomically; t.mu is held.
func (t *Table) save() error {
	tmp := t.path + ".tmp"
	if len(t.names) != len(t.homes) {
		t.names = slices.Sorted(maps.Keys(t.homes))
	}
	if err := sysfile.WriteFile(tmp, encodeUsers(t.homes, t.names), 0o600); err != nil {
		return fmt.Errorf("home users: %w", err)
	}
	if err := os.Rename(tmp, t.path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("home users: %w", err)
	}
	return nil
}

// encodeUsers is homes in the form of the users file (usersRecord), one
// home a line in the order of ids, their names in order. A storm of
// first starts writes it once a pass, over every home that started
// before: it is made by hand, as encodeRegistry, from the order the
// table keeps, where encoding/json sorted the names again each time.
func encodeUsers(homes map[string]uint32, ids []string) []byte {
	out := make([]byte, 0, 32+len(ids)*40)
	out = append(out, "{\n  \"homes\": {"...)
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, "\n    "...)
		out = appendJSONString(out, id)
		out = append(out, ": "...)
		out = strconv.AppendUint(out, uint64(homes[id]), 10)
	}
	if len(ids) > 0 {
		out = append(out, "\n  "...)
	}
	return append(out, "}\n}\n"...)
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

// Credential is how a process of a home runs: uid and gid, and no
// supplementary group.
func Credential(uid, gid uint32) *syscall.Credential {
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
}

// Lookup finds the uid and gid of account name, which must not
// be root.
func Lookup(name string) (uid, gid uint32, err error) {
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

// ClosedToOthers returns what on the way to path (its parent directories,
// outermost first, and path itself when it is a program) a user other
// than the owner cannot pass or run, space-separated; "" when nothing.
func ClosedToOthers(path string, program bool) string {
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

// Layout is what SetUp decided.
type Layout struct {
	// Table hands each home a uid of its own; nil when homes run as the
	// gateway's user (for the reason Shared) or are refused (Refused).
	Table *Table
	// Shared says why homes run as the gateway's user, where they do.
	Shared string
	// Refused says why a root gateway runs no home: it could not give
	// them users of their own, and never runs one as root unless
	// exec.users.mode is off.
	Refused string
	// Homes is the folder of the home folders: data_dir/homes, or its
	// place under Params.MachineDir (machineHomes).
	Homes string
	// Self is {self} as homes run it: the gateway's executable, or its
	// copy under Params.MachineDir (machineSelf).
	Self string
	// Moved says what was laid out under Params.MachineDir and why; ""
	// when nothing was.
	Moved string
}

// Params is what SetUp decides from: the exec provider's settings.
type Params struct {
	// Users is the provider's users setting.
	Users Users
	// DataDir is the provider's data_dir, absolute.
	DataDir string
	// MachineDir is the machine-wide folder of root gateways; empty:
	// homesdir.DefaultMachineDir.
	MachineDir string
	// Self is the gateway's own executable, {self}; RunsSelf says whether
	// a home's program is {self}, which a home's own user must then be
	// able to run.
	Self     string
	RunsSelf bool
}

// SetUp decides whether each home runs as a user of its own, from
// cfg.Users and what the machine allows, and prepares for it. A root
// gateway never falls back to running homes as root (design rule 34):
// where data_dir lies under a folder other users cannot pass, the home
// folders are laid out under cfg.MachineDir (machineHomes), and where
// they cannot run the gateway's binary ({self}), they run a copy of it
// there (machineSelf); when even that fails, mode auto refuses every home
// (Layout.Refused) and mode dynamic refuses to start. data_dir and
// data_dir/homes become 0711 and data_dir/exec 0700, so the gateway's
// files stay unreadable to homes.
func SetUp(cfg Params) (Layout, error) {
	us := Layout{Homes: filepath.Join(cfg.DataDir, "homes"), Self: cfg.Self}
	mode := cfg.Users.Mode
	if mode == "" || mode == Off {
		us.Shared = "exec.users.mode is off"
		return us, nil
	}
	if mode != Auto && mode != Dynamic {
		return us, fmt.Errorf("users mode %q: want off, auto or dynamic", mode)
	}
	first, last := cfg.Users.First, cfg.Users.Last
	if first == 0 && last == 0 {
		first, last = DefaultFirst, DefaultLast
	}
	if first == 0 || first > last {
		return us, fmt.Errorf("users range %d-%d: want FIRST-LAST with 0 < FIRST <= LAST", first, last)
	}
	if os.Geteuid() != 0 {
		why := fmt.Sprintf("the gateway runs as uid %d, not root, so it cannot start homes as other users", os.Geteuid())
		if mode == Dynamic {
			return us, fmt.Errorf("users mode dynamic: %s", why)
		}
		us.Shared = why
		return us, nil
	}
	machine := cfg.MachineDir
	if machine == "" {
		machine = homesdir.DefaultMachineDir
	}
	var moved []string
	refuse := func(what string, err error, fix string) (Layout, error) {
		why := fmt.Sprintf("%s, and %v: %s, or set exec.users.mode off to run homes as root on purpose", what, err, fix)
		if mode == Dynamic {
			return us, fmt.Errorf("users mode dynamic: %s", why)
		}
		us.Refused = why
		return us, nil
	}
	if d := ClosedToOthers(cfg.DataDir, false); d != "" {
		dir, err := machineHomes(machine, cfg.DataDir)
		if err == nil {
			if c := ClosedToOthers(filepath.Join(dir, "x"), false); c != "" {
				err = fmt.Errorf("%s is closed to other users", c)
			}
		}
		if err != nil {
			return refuse(fmt.Sprintf("%s is closed to other users, so a home's user could not reach its folder under %s", d, cfg.DataDir),
				err, fmt.Sprintf("chmod o+x %s, or move data_dir, or fix exec.users.machine_dir (%s)", d, machine))
		}
		us.Homes = dir
		moved = append(moved, fmt.Sprintf("home folders in %s (data_dir/homes links there), because %s is closed to other users", dir, d))
	}
	if cfg.RunsSelf {
		if p := ClosedToOthers(cfg.Self, true); p != "" {
			cp, err := machineSelf(machine, cfg.Self)
			if err == nil {
				if c := ClosedToOthers(cp, true); c != "" {
					err = fmt.Errorf("%s is closed to other users", c)
				}
			}
			if err != nil {
				return refuse(fmt.Sprintf("%s is closed to other users, so a home's user could not run {self} (%s)", p, cfg.Self),
					err, fmt.Sprintf("chmod o+x %s, or install wakegate where every user may run it", p))
			}
			us.Self = cp
			moved = append(moved, fmt.Sprintf("{self} runs as %s, because %s is closed to other users", cp, p))
		}
	}
	us.Moved = strings.Join(moved, "; ")
	dirs := []struct {
		path string
		mode os.FileMode
	}{{cfg.DataDir, 0o711}, {filepath.Join(cfg.DataDir, "exec"), 0o700}}
	if us.Homes == filepath.Join(cfg.DataDir, "homes") {
		dirs = append(dirs, struct {
			path string
			mode os.FileMode
		}{us.Homes, 0o711})
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
	t, err := openTable(filepath.Join(cfg.DataDir, "exec", File), first, last)
	if err != nil {
		return us, err
	}
	t.registry, t.dataDir = &uidRegistry{dir: machine}, cfg.DataDir
	if err := t.registry.claim(cfg.DataDir, t.homes); err != nil {
		return us, err
	}
	us.Table = t
	return us, nil
}

// PrepareFolder makes the home folder dir (and its TMPDIR, .tmp inside it) belong
// to uid and gid with mode 0700. A folder that another user owns (a home
// started before homes had users of their own) is handed over whole, once:
// no process of uid runs in it yet, so nothing in it moves under the walk.
func PrepareFolder(dir string, uid, gid uint32) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok {
		return fmt.Errorf("home dir %s is not a directory", dir)
	}
	if sys.Uid != uid || sys.Gid != gid {
		err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(uid), int(gid))
		})
		if err != nil {
			return fmt.Errorf("home dir: giving it to uid %d: %w", uid, err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("home dir: %w", err)
	}
	tmp := filepath.Join(dir, TmpDir)
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

// TmpDir is a home's TMPDIR inside its folder, when it has a user of its
// own: the system's /tmp is shared by every user.
const TmpDir = ".tmp"
