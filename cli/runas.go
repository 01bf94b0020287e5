package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runAsEnv names the user `wakegate serve` becomes once it has prepared
// its data directory, when it starts as root (the container image sets it:
// a new volume is mounted owned by root, and nothing else in the image can
// give it to the gateway's user). The --user flag says the same.
const runAsEnv = "WAKEGATE_USER"

// runAs is who the gateway runs as after start.
type runAs struct {
	uid, gid int
	spec     string // as given, for messages
}

// parseRunAs reads "USER[:GROUP]", each a name or a number; a user without
// a group takes the user's primary group.
func parseRunAs(spec string) (runAs, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	r := runAs{spec: spec}
	if name == "" || (hasGroup && group == "") {
		return r, fmt.Errorf("%s %q: want USER or USER:GROUP, each a name or a number", runAsEnv, spec)
	}
	primary := -1
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		r.uid = n
		if u, err := user.LookupId(name); err == nil {
			primary, _ = strconv.Atoi(u.Gid)
		}
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return r, fmt.Errorf("%s %q: no user %s on this machine (give its number)", runAsEnv, spec, name)
		}
		r.uid, _ = strconv.Atoi(u.Uid)
		primary, _ = strconv.Atoi(u.Gid)
	}
	switch {
	case !hasGroup && primary >= 0:
		r.gid = primary
	case !hasGroup:
		r.gid = r.uid // a numeric user unknown to /etc/passwd: its own group
	default:
		if n, err := strconv.Atoi(group); err == nil && n >= 0 {
			r.gid = n
		} else if g, err := user.LookupGroup(group); err == nil {
			r.gid, _ = strconv.Atoi(g.Gid)
		} else {
			return r, fmt.Errorf("%s %q: no group %s on this machine (give its number)", runAsEnv, spec, group)
		}
	}
	if r.uid == 0 {
		return r, fmt.Errorf("%s %q: names root; leave it unset to run as root", runAsEnv, spec)
	}
	return r, nil
}

// become gives dataDir to r's user when it is not its own yet (a volume
// mounted for the first time is root's), then drops the process's groups
// and ids to r's for good. A gateway that is not root must already be r's
// user: it cannot change who it is.
func (r runAs) become(dataDir string, log *slog.Logger) error {
	if os.Geteuid() != 0 {
		if os.Geteuid() == r.uid {
			return nil
		}
		return fmt.Errorf("%s %s: the gateway runs as uid %d, not root, so it cannot become uid %d "+
			"(start it as root, or as that user, or unset %s)", runAsEnv, r.spec, os.Geteuid(), r.uid, runAsEnv)
	}
	given, err := r.giveDataDir(dataDir)
	if err != nil {
		return fmt.Errorf("%s %s: give data_dir %s to uid %d: %w", runAsEnv, r.spec, dataDir, r.uid, err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("%s %s: drop supplementary groups: %w", runAsEnv, r.spec, err)
	}
	if err := syscall.Setgid(r.gid); err != nil {
		return fmt.Errorf("%s %s: setgid %d: %w", runAsEnv, r.spec, r.gid, err)
	}
	if err := syscall.Setuid(r.uid); err != nil {
		return fmt.Errorf("%s %s: setuid %d: %w", runAsEnv, r.spec, r.uid, err)
	}
	log.Info("running as an unprivileged user", "uid", r.uid, "gid", r.gid, "data_dir", dataDir, "entries_given", given)
	return nil
}

// giveDataDir creates dataDir if missing and, when dataDir is not r's
// own, gives it and everything under it to r (links themselves, never what
// they point to). A data_dir already r's is left as it is: its contents
// were made by r.
func (r runAs) giveDataDir(dataDir string) (int, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return 0, err
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		return 0, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == r.uid {
		return 0, nil
	}
	n := 0
	err = filepath.WalkDir(dataDir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, r.uid, r.gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	return n, err
}
