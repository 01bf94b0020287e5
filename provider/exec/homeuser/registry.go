package homeuser

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/homesdir"
	"github.com/wakegate/wakegate/internal/sysfile"
)

// uidRegistry is the machine-wide record of which home of which gateway
// holds each uid, shared by every root gateway of the machine through
// MachineDir/uids.json under an exclusive flock of MachineDir/uids.lock:
// two gateways never hand out one uid, whatever ranges they are given
// (design rule 34).
type uidRegistry struct {
	dir string // MachineDir

	// mu is held around the registry's flock, and guards known and
	// knownAt: the registry as this gateway last read or wrote it, and
	// the file it was in. The file is decoded again only when another
	// gateway of the machine has written it since; a storm of first starts
	// on one gateway then costs no decoding of a registry that only it
	// changes.
	mu      sync.Mutex
	known   map[uint32]uidOwner
	knownAt fileStamp

	// A look at the machine, under mu: the uids its processes ran as
	// (live) and what was found of its accounts (accounts, uid to
	// whether one names it) at lookedAt. The passes of one lookTTL
	// share it (recentLook).
	lookedAt time.Time
	live     map[uint32]bool
	accounts map[uint32]bool
}

// lookTTL is how long a pass that hands out uids may use the look at the
// machine's processes and accounts an earlier pass took. A look reads
// every process of the machine (and an account lookup the system's user
// and group databases), which in a storm of first starts, one pass per
// home, was a fifth of the gateway's CPU. The look only keeps a uid that
// no gateway's registry holds away from a process or an account of
// someone else: what began as that uid within lookTTL of a pass is as
// unseen as what begins right after it. Taking uids back (reclaim) still
// looks again, since it must not take one that still runs.
const lookTTL = 500 * time.Millisecond

// recentLook makes the look at the machine recent: one taken within
// lookTTL is kept. r.mu is held.
func (r *uidRegistry) recentLook() {
	if r.live != nil && time.Since(r.lookedAt) < lookTTL {
		return
	}
	r.freshLook()
}

// freshLook looks at the machine again. r.mu is held.
func (r *uidRegistry) freshLook() {
	r.lookedAt, r.live, r.accounts = time.Now(), liveUIDs(), map[uint32]bool{}
}

// free reports whether, by the look at the machine, no process runs as
// uid and no account of the system names it. r.mu is held.
func (r *uidRegistry) free(uid uint32) bool {
	if r.live[uid] {
		return false
	}
	sys, ok := r.accounts[uid]
	if !ok {
		sys = systemAccount(uid)
		r.accounts[uid] = sys
	}
	return !sys
}

// fileStamp tells one version of a file from another: a write renames a
// new file in place, so its inode changes, and its size and time with it.
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

// stampOf is path's stamp, or false when it cannot be read.
func stampOf(path string) (fileStamp, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStamp{}, false
	}
	return fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}, true
}

// uidOwner is who holds a uid: a home of the gateway with a data_dir.
type uidOwner struct {
	DataDir string `json:"data_dir"`
	Home    string `json:"home"`
}

// registryRecord is the form of uids.json.
type registryRecord struct {
	UIDs map[string]uidOwner `json:"uids"`
}

// locked runs fn with the registry read and locked; fn's changes are
// written when it returns true.
func (r *uidRegistry) locked(fn func(uids map[uint32]uidOwner) (bool, error)) error {
	// One caller of this gateway at a time takes the flock, so that the
	// others wait here and not in the system call.
	r.mu.Lock()
	defer r.mu.Unlock()
	lockPath := filepath.Join(r.dir, "uids.lock")
	lock, err := sysfile.Open(lockPath, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		return fmt.Errorf("uid registry: %w", err)
	}
	defer unix.Close(lock) //nolint:errcheck // the lock's descriptor; closing it also drops the flock
	if err := flock(lock, unix.LOCK_EX); err != nil {
		return fmt.Errorf("uid registry: lock %s: %w", lockPath, err)
	}
	defer func() { _ = flock(lock, unix.LOCK_UN) }()
	path := filepath.Join(r.dir, "uids.json")
	uids, err := r.read(path)
	if err != nil {
		return err
	}
	uids = maps.Clone(uids)
	changed, err := fn(uids)
	if err != nil || !changed {
		return err
	}
	tmp := path + ".tmp"
	if err := sysfile.WriteFile(tmp, encodeRegistry(uids), 0o600); err != nil {
		return fmt.Errorf("uid registry: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("uid registry: %w", err)
	}
	r.known = nil
	if at, ok := stampOf(path); ok {
		r.known, r.knownAt = uids, at
	}
	return nil
}

// flock is unix.Flock, again when a signal interrupts the wait for the
// lock.
func flock(fd, how int) error {
	for {
		if err := unix.Flock(fd, how); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// read returns the registry in path: the one known, if path is still the
// file it was in, else the file decoded (and then known). The caller
// holds the flock and r.mu, and must not change what it gets.
func (r *uidRegistry) read(path string) (map[uint32]uidOwner, error) {
	at, found := stampOf(path)
	if found && r.known != nil && at == r.knownAt {
		return r.known, nil
	}
	uids := map[uint32]uidOwner{}
	b, err := sysfile.Read(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return uids, nil
	case err != nil:
		return nil, fmt.Errorf("uid registry: %w", err)
	}
	var rec registryRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("uid registry %s is not readable (%v): restore it, or remove it for every gateway "+
			"of the machine to register its homes' uids again as it starts", path, err)
	}
	for k, o := range rec.UIDs {
		uid, err := strconv.ParseUint(k, 10, 32)
		if err != nil || uid == 0 {
			return nil, fmt.Errorf("uid registry %s: uid %q: want a number above 0", path, k)
		}
		uids[uint32(uid)] = o
	}
	r.known, r.knownAt = uids, at
	if !found {
		r.known = nil
	}
	return uids, nil
}

// claim registers the uids a gateway's users file already gives its homes
// (a gateway that ran before the registry, or whose entries were lost).
// A uid registered to a home of another gateway is an error that names
// both: the two homes share a user, and each can reach the other.
func (r *uidRegistry) claim(dataDir string, homes map[string]uint32) error {
	return r.locked(func(uids map[uint32]uidOwner) (bool, error) {
		changed := false
		for id, uid := range homes {
			me := uidOwner{DataDir: dataDir, Home: id}
			o, ok := uids[uid]
			switch {
			case !ok:
				uids[uid] = me
				changed = true
			case o != me && stale(o, uid, liveUIDs()):
				uids[uid] = me
				changed = true
			case o != me:
				return false, fmt.Errorf("home users: uid %d of home %s is also the uid of home %s of the gateway "+
					"with data_dir %s (%s): the two homes would share a user; give this gateway's exec.users.range "+
					"no uid of the other's, remove home %s from %s, and start again (it is given a new uid, and files "+
					"it wrote keep the old one)", uid, id, o.Home, o.DataDir, filepath.Join(r.dir, "uids.json"),
					id, filepath.Join(dataDir, "exec", File))
			}
		}
		return changed, nil
	})
}

// allocate registers and returns, for each home of ids, the lowest uid
// of first-last that no home of any gateway of the machine holds, no
// account of the system names and no live process runs as (by a look at
// the machine of the last lookTTL), in one pass of the registry. When
// none is left, uids of homes whose gateway no longer records them (its
// data_dir was removed) are taken back first, their folders under
// MachineDir removed with them. A home that gets no uid has its error in
// errs.
func (r *uidRegistry) allocate(dataDir string, ids []string, first, last uint32) (got map[string]uint32, errs map[string]error) {
	got, errs = map[string]uint32{}, map[string]error{}
	err := r.locked(func(uids map[uint32]uidOwner) (bool, error) {
		next := first // the uids below are taken, in this pass
		r.recentLook()
		reclaimed := false
		for _, id := range ids {
			if _, dup := got[id]; dup {
				continue
			}
			for {
				for ; next >= first && next <= last; next++ {
					if _, taken := uids[next]; taken || !r.free(next) {
						continue
					}
					uids[next] = uidOwner{DataDir: dataDir, Home: id}
					got[id] = next
					break
				}
				if _, ok := got[id]; ok || reclaimed {
					break
				}
				reclaimed = true
				fresh := map[uint32]bool{}
				for _, uid := range got {
					fresh[uid] = true
				}
				if !r.reclaim(uids, first, last, fresh) {
					break
				}
				next = first
				r.freshLook()
			}
			if _, ok := got[id]; !ok {
				errs[id] = fmt.Errorf("no free uid left in %d-%d for home %s (the homes of every gateway of this machine "+
					"hold them, see %s): widen exec.users.range", first, last, id, filepath.Join(r.dir, "uids.json"))
			}
		}
		return len(got) > 0, nil
	})
	if err != nil {
		for _, id := range ids {
			errs[id] = err
		}
		return nil, errs
	}
	return got, errs
}

// reclaim drops the stale entries of first-last (see stale) but those of
// fresh (handed out in this pass, not yet in their gateway's users file),
// and removes the folders of their homes under MachineDir that the uid
// owns, so the next holder of the uid reads nothing of theirs. It reports
// whether it dropped any.
func (r *uidRegistry) reclaim(uids map[uint32]uidOwner, first, last uint32, fresh map[uint32]bool) bool {
	dropped, live := false, liveUIDs()
	for uid, o := range uids {
		if uid < first || uid > last || fresh[uid] || !stale(o, uid, live) {
			continue
		}
		dir := filepath.Join(homesdir.Of(r.dir, o.DataDir), o.Home)
		if st, err := os.Lstat(dir); err == nil && st.IsDir() && st.Sys().(*syscall.Stat_t).Uid == uid {
			_ = os.RemoveAll(dir)
		}
		delete(uids, uid)
		dropped = true
	}
	return dropped
}

// stale reports whether the registry's owner o of uid is gone: its
// gateway's users file no longer exists or gives the home another uid,
// and no process runs as uid (live).
func stale(o uidOwner, uid uint32, live map[uint32]bool) bool {
	b, err := sysfile.Read(filepath.Join(o.DataDir, "exec", File))
	if err == nil {
		var rec usersRecord
		if json.Unmarshal(b, &rec) != nil || rec.Homes[o.Home] == uid {
			return false
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return !live[uid]
}

// liveUIDs are the uids processes of the machine run as now. A look
// stats every process of the machine (thousands in a storm of first
// starts), each by its name in /proc, without sorting or allocating.
func liveUIDs() map[uint32]bool {
	out := map[uint32]bool{}
	proc, err := os.Open("/proc")
	if err != nil {
		return out
	}
	defer proc.Close()
	names, _ := proc.Readdirnames(-1)
	dfd := int(proc.Fd())
	var st unix.Stat_t
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if unix.Fstatat(dfd, name, &st, 0) == nil {
			out[st.Uid] = true
		}
	}
	return out
}

// encodeRegistry is uids in the form of uids.json (registryRecord), one
// entry a line in the order of the uids. It is written at every pass of
// the registry, so it is made by hand: encoding/json's reflection and
// indentation cost more than the rest of a pass.
func encodeRegistry(uids map[uint32]uidOwner) []byte {
	keys := slices.Sorted(maps.Keys(uids))
	out := make([]byte, 0, 16+len(keys)*96)
	out = append(out, "{\n  \"uids\": {"...)
	for i, uid := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		o := uids[uid]
		out = append(out, "\n    \""...)
		out = strconv.AppendUint(out, uint64(uid), 10)
		out = append(out, "\": {\"data_dir\": "...)
		out = appendJSONString(out, o.DataDir)
		out = append(out, ", \"home\": "...)
		out = appendJSONString(out, o.Home)
		out = append(out, '}')
	}
	if len(keys) > 0 {
		out = append(out, "\n  "...)
	}
	return append(out, "}\n}\n"...)
}

// appendJSONString appends s to out as a JSON string: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced, as
// encoding/json reads it back.
func appendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	if plainJSON(s) {
		out = append(out, s...)
		return append(out, '"')
	}
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return append(out, '"')
}

// plainJSON reports whether s is its own JSON string content: printable
// ASCII, no quote, no backslash. Home names and data_dir paths nearly
// always are.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
