package cgroup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
)

// Root finds the cgroup v2 hierarchy and creates, in the gateway's
// own cgroup, the cgroup of this gateway's homes. what names the kind of
// hierarchy (pure v2, or hybrid with v2 at its mount point).
func Root(dataDir string) (root, what string, err error) {
	root, what, err = RootPath(dataDir)
	if err != nil {
		return "", what, err
	}
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", what, fmt.Errorf("%s: cannot create a cgroup: %w", what, err)
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.kill")); err != nil {
		_ = unix.Rmdir(root)
		return "", what, fmt.Errorf("%s: no cgroup.kill (Linux 5.14 or later has it)", what)
	}
	// Empty cgroups of homes that ended while no gateway ran go.
	ents, _ := os.ReadDir(root)
	for _, en := range ents {
		if en.IsDir() && strings.HasPrefix(en.Name(), Prefix) {
			Remove(filepath.Join(root, en.Name()))
		}
	}
	return root, what, nil
}

// RootPath is where Root makes the cgroup of the homes of
// the gateway with dataDir.
func RootPath(dataDir string) (root, what string, err error) {
	mount, mroot, err := Mount()
	if err != nil {
		return "", "", err
	}
	what = "cgroup v2 (unified hierarchy at " + mount + ")"
	if mount != "/sys/fs/cgroup" {
		what = "hybrid cgroups (v2 at " + mount + ")"
	}
	own, err := Own()
	if err != nil {
		return "", what, err
	}
	rel, ok := strings.CutPrefix(own, mroot)
	if !ok {
		return "", what, fmt.Errorf("%s: the gateway's cgroup %s is outside the mounted part %s", what, own, mroot)
	}
	sum := sha256.Sum256([]byte(dataDir))
	return filepath.Join(mount, rel, "wakegate-"+hex.EncodeToString(sum[:4])), what, nil
}

// Mount returns where the cgroup v2 hierarchy is mounted (the one
// at /sys/fs/cgroup first) and which part of it is mounted there.
func Mount() (mount, root string, err error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("no cgroup v2: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		if mount == "" || f[4] == "/sys/fs/cgroup" {
			mount, root = f[4], f[3]
		}
	}
	if mount == "" {
		return "", "", errors.New("no cgroup v2 hierarchy is mounted")
	}
	return mount, root, nil
}

// Own is the gateway's own cgroup v2 path ("0::" in /proc/self/cgroup).
func Own() (string, error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("the gateway's cgroup: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("the gateway is in no cgroup v2")
}

// Populated reads "populated" from a cgroup's cgroup.events: whether a
// live process is in it. A missing cgroup is empty.
func Populated(dir string) (bool, error) {
	raw, err := sysfile.Read(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup events: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v != "0", nil
		}
	}
	return false, fmt.Errorf("cgroup events of %s: no populated line", dir)
}

// Procs lists the processes in a cgroup.
func Procs(dir string) ([]int, error) {
	raw, err := sysfile.Read(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup procs: %w", err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Kill sends SIGKILL to every process of a cgroup, however it detached.
func Kill(dir string) error {
	err := sysfile.Write(filepath.Join(dir, "cgroup.kill"), []byte("1"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cgroup kill: %w", err)
	}
	return nil
}

// ProcsTree lists the processes in a cgroup and its children.
func ProcsTree(dir string) ([]int, error) {
	pids, err := Procs(dir)
	if err != nil {
		return nil, err
	}
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if en.IsDir() {
			more, _ := Procs(filepath.Join(dir, en.Name()))
			pids = append(pids, more...)
		}
	}
	return pids, nil
}

// Remove removes an empty cgroup and its empty children; one that is
// not empty stays.
func Remove(dir string) {
	if dir == "" {
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if en.IsDir() {
			_ = unix.Rmdir(filepath.Join(dir, en.Name()))
		}
	}
	_ = unix.Rmdir(dir)
}

// Open creates the cgroup dir if needed and opens it for
// CLONE_INTO_CGROUP: a child then starts inside it, with no moment
// outside in which it could fork.
func Open(dir string) (int, error) {
	if err := mkdirUnder(dir); err != nil {
		return -1, fmt.Errorf("home cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("home cgroup: %w", err)
	}
	return fd, nil
}

// mkdirUnder makes dir and its parent when missing, in a mkdir each (a
// start's cgroup is made inside its home's, which the last stop of the
// home removed), and falls back to os.MkdirAll when more is missing.
func mkdirUnder(dir string) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		err := unix.Mkdir(d, 0o755)
		if errors.Is(err, unix.ENOENT) {
			return os.MkdirAll(dir, 0o755)
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &fs.PathError{Op: "mkdir", Path: d, Err: err}
		}
	}
	return nil
}

// Prefix names a home's cgroup under the root: no controller's
// interface file (memory.max, cgroup.procs, ...) starts with it, whatever
// the home's id.
const Prefix = "home-"
