package homeuser

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/internal/homesdir"
)

// What a root gateway keeps outside its data_dir, in the machine-wide
// folder Config.MachineDir (default /var/lib/wakegate), so that every home
// runs as a user of its own whatever the layout of data_dir (design rule
// 34):
//
//	MachineDir/            root, 0711
//	  uids.json, uids.lock root, 0600: the uid of every home of every gateway (registry.go)
//	  homes/               root, 0711
//	    <hash of data_dir>/ root, 0711: the home folders of a data_dir other users cannot pass
//	      <id>/            the home's uid, 0700
//	  bin/                 root, 0711
//	    <sha-256>/<name>   root, 0755: {self}, when other users cannot run the gateway's own binary

// ensureRootDir makes dir (and its missing parents, 0755) and checks that
// it belongs to root and that no other user may write to it or replace
// it, then gives it mode. A folder that fails the check is refused: what
// lies under it could be swapped by its owner.
func ensureRootDir(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		if err != nil {
			return err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return fmt.Errorf("%s: no owner", d)
		case st.Mode()&fs.ModeSymlink != 0 && d == dir:
			return fmt.Errorf("%s is a symbolic link: want a folder", d)
		case sys.Uid != 0 && st.Mode()&fs.ModeSymlink == 0:
			return fmt.Errorf("%s belongs to uid %d, not root: chown root %s", d, sys.Uid, d)
		case st.Mode()&fs.ModeSymlink == 0 && st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%s is writable by other users (mode %o): chmod go-w %s", d, st.Mode().Perm(), d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return os.Chmod(dir, mode)
}

// machineHomes lays out the home folders of data_dir dataDir under
// machineDir (homesdir.Of) and links dataDir/homes to it, so that the
// gateway and its operator find them where they always were; the homes
// see only the real path. A dataDir/homes folder of earlier starts is
// moved there first. It returns the real folder.
func machineHomes(machineDir, dataDir string) (string, error) {
	dst := homesdir.Of(machineDir, dataDir)
	if err := ensureRootDir(filepath.Dir(dst), 0o711); err != nil {
		return "", err
	}
	link := filepath.Join(dataDir, "homes")
	st, err := os.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", err
	case st.Mode()&fs.ModeSymlink != 0:
		if to, _ := os.Readlink(link); to == dst {
			return dst, ensureRootDir(dst, 0o711)
		}
		if err := os.Remove(link); err != nil {
			return "", err
		}
	case st.IsDir():
		if _, err := os.Lstat(dst); err == nil {
			// A data_dir made again at the path of an earlier one (removed
			// to start afresh) has an empty homes folder of its own: the
			// earlier one's home folders, kept, are the homes'.
			if err := os.Remove(link); err == nil {
				break
			}
			return "", fmt.Errorf("both %s and %s hold home folders: move what %s holds into %s, remove it, and start again",
				link, dst, link, dst)
		}
		if err := moveTree(link, dst); err != nil {
			return "", fmt.Errorf("moving the home folders %s to %s: %w; move them yourself and start again", link, dst, err)
		}
	default:
		return "", fmt.Errorf("%s is not a folder: remove it", link)
	}
	if err := ensureRootDir(dst, 0o711); err != nil {
		return "", err
	}
	if err := os.Symlink(dst, link); err != nil {
		return "", err
	}
	return dst, nil
}

// machineSelf copies the executable self into machineDir/bin/<its
// SHA-256>/, root-owned and 0755, so that a home's own user may run it,
// and returns the copy's path. A copy already there with the same content
// is used as it is: a gateway restarted with the same binary adopts homes
// that run it.
func machineSelf(machineDir, self string) (string, error) {
	in, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.Copy(h, in); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(machineDir, "bin", sum)
	if err := ensureRootDir(filepath.Dir(dir), 0o711); err != nil {
		return "", err
	}
	if err := ensureRootDir(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(self))
	if st, err := os.Lstat(dst); err == nil && st.Mode().IsRegular() && st.Mode().Perm() == 0o755 &&
		st.Sys().(*syscall.Stat_t).Uid == 0 && sameContent(dst, sum) {
		return dst, nil
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".copy-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	removeUnusedCopies(filepath.Dir(dir), dir)
	return dst, nil
}

// unusedCopyAge is how old a copy of {self} no process runs must be for
// removeUnusedCopies to remove it: a gateway that made it a moment ago
// may not have started a home from it yet.
const unusedCopyAge = 24 * time.Hour

// removeUnusedCopies removes the copies of {self} in bin, but keep, that
// no live process runs and that are older than unusedCopyAge: each build
// of a gateway leaves one, and a home that is not running starts from the
// gateway's current copy.
func removeUnusedCopies(bin, keep string) {
	ents, err := os.ReadDir(bin)
	if err != nil {
		return
	}
	running := map[string]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe")); err == nil {
			running[filepath.Dir(exe)] = true
		}
	}
	for _, en := range ents {
		dir := filepath.Join(bin, en.Name())
		st, err := os.Lstat(dir)
		if dir == keep || err != nil || !st.IsDir() || running[dir] || time.Since(st.ModTime()) < unusedCopyAge {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// sameContent reports whether the file at path has SHA-256 sum (hex).
func sameContent(path, sum string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return hex.EncodeToString(h.Sum(nil)) == sum
}

// moveTree moves the folder src to dst: a rename where both are on one
// file system, otherwise a copy that keeps every entry's mode and owner
// (home folders belong to their homes' users), then the removal of src.
func moveTree(src, dst string) error {
	err := os.Rename(src, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(p, to, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return nil // a socket or a pipe of a stopped home is not kept
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if err := os.Lchown(to, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		if d.IsDir() {
			return os.Chmod(to, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dst)
		return fmt.Errorf("copy across file systems: %w", err)
	}
	return os.RemoveAll(src)
}

// copyFile copies the regular file src to a new file dst of mode perm.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
