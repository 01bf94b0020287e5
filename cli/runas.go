package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runAsEnv names the user ("uid:gid") a gateway started as root runs as.
// The image sets it: a volume that a platform formats for it belongs to
// root (Fly.io mounts it so), and an image without a shell has no way to
// give it to the gateway's user but the gateway itself.
const runAsEnv = "WAKEGATE_RUN_AS"

// runAs gives dataDir, and whatever root owns in it, to the user that
// $WAKEGATE_RUN_AS names, then makes this process that user (groups
// dropped, gid then uid, for every thread). It does nothing unless the
// process runs as root and the variable is set, and reports whether it
// dropped. Files other users own (homes run as their own users) are left
// as they are.
func runAs(dataDir string) (bool, error) {
	spec := os.Getenv(runAsEnv)
	if spec == "" || os.Geteuid() != 0 {
		return false, nil
	}
	uid, gid, err := parseRunAs(spec)
	if err != nil {
		return false, fmt.Errorf("%s=%q: %w", runAsEnv, spec, err)
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return false, fmt.Errorf("create data_dir %s: %w", dataDir, err)
	}
	err = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || (path != dataDir && st.Uid != 0) {
			return nil // another user's, such as a home's own
		}
		if int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return false, fmt.Errorf("give data_dir %s to %d:%d: %w", dataDir, uid, gid, err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return false, fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return false, fmt.Errorf("set gid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return false, fmt.Errorf("set uid %d: %w", uid, err)
	}
	return true, nil
}

// parseRunAs parses "uid:gid", both numbers, uid not 0.
func parseRunAs(spec string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(spec, ":")
	if !ok {
		return 0, 0, errors.New("want uid:gid, such as 65532:65532")
	}
	if uid, err = strconv.Atoi(u); err != nil || uid <= 0 {
		return 0, 0, errors.New("want a numeric uid other than 0 (root) before the colon")
	}
	if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
		return 0, 0, errors.New("want a numeric gid after the colon")
	}
	return uid, gid, nil
}
