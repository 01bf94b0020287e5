package execprov

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
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot finds the cgroup v2 hierarchy and creates, in the gateway's
// own cgroup, the cgroup of this gateway's homes. what names the kind of
// hierarchy (pure v2, or hybrid with v2 at its mount point).
func cgroupRoot(dataDir string) (root, what string, err error) {
	root, what, err = cgroupRootPath(dataDir)
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
		if en.IsDir() && strings.HasPrefix(en.Name(), cgroupPrefix) {
			cgRemove(filepath.Join(root, en.Name()))
		}
	}
	return root, what, nil
}

// cgroupRootPath is where cgroupRoot makes the cgroup of the homes of
// the gateway with dataDir.
func cgroupRootPath(dataDir string) (root, what string, err error) {
	mount, mroot, err := cgroup2Mount()
	if err != nil {
		return "", "", err
	}
	what = "cgroup v2 (unified hierarchy at " + mount + ")"
	if mount != "/sys/fs/cgroup" {
		what = "hybrid cgroups (v2 at " + mount + ")"
	}
	own, err := ownCgroup()
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

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted (the one
// at /sys/fs/cgroup first) and which part of it is mounted there.
func cgroup2Mount() (mount, root string, err error) {
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

// ownCgroup is the gateway's own cgroup v2 path ("0::" in /proc/self/cgroup).
func ownCgroup() (string, error) {
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

// cgroupDir is the cgroup of home id; "" without cgroups.
func (c containment) cgroupDir(id string) string {
	if c.mode != ContainCgroup {
		return ""
	}
	return filepath.Join(c.root, cgroupPrefix+id)
}

// cgPopulated reads "populated" from a cgroup's cgroup.events: whether a
// live process is in it. A missing cgroup is empty.
func cgPopulated(dir string) (bool, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
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

// cgProcs lists the processes in a cgroup.
func cgProcs(dir string) ([]int, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
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

// cgKill sends SIGKILL to every process of a cgroup, however it detached.
func cgKill(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cgroup kill: %w", err)
	}
	return nil
}

// cgProcsTree lists the processes in a cgroup and its children.
func cgProcsTree(dir string) ([]int, error) {
	pids, err := cgProcs(dir)
	if err != nil {
		return nil, err
	}
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if en.IsDir() {
			more, _ := cgProcs(filepath.Join(dir, en.Name()))
			pids = append(pids, more...)
		}
	}
	return pids, nil
}

// cgSignal sends sig to each of pids that is in cgroup dir (or one of its
// children). A process is signalled through a pidfd, after its membership
// is read again: a pid that was freed and handed to another process
// meanwhile is not signalled.
func (c containment) cgSignal(pids []int, dir string, sig unix.Signal) {
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if c.inCgroup(pid, dir) {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		_ = unix.Close(fd)
	}
}

// inCgroup reports whether pid is in cgroup dir or a child of it now.
func (c containment) inCgroup(pid int, dir string) bool {
	a := c.cgroupOfProc(pid)
	return a != "" && (a == dir || strings.HasPrefix(a, dir+"/"))
}

// cgroupOfProc is the cgroup v2 directory pid is in; "" when unknown.
func (c containment) cgroupOfProc(pid int) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if rel, ok := strings.CutPrefix(p, c.mroot); ok {
				return filepath.Join(c.mount, rel)
			}
		}
	}
	return ""
}

// cgRemove removes an empty cgroup and its empty children; one that is
// not empty stays.
func cgRemove(dir string) {
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

// runCgroup makes a new cgroup for one process of home h, inside the
// home's: the home's cgroup holds every process of every start, and each
// start's own one tells what a process left behind when it exits apart
// from the next start's processes.
func runCgroup(h *home) string {
	return filepath.Join(h.cgroup, "run-"+strconv.FormatInt(time.Now().UnixNano(), 36))
}

// cgroupOfStart returns the cgroup of pid inside home h's cgroup (the one
// of its start), or h's cgroup when pid is in none of them.
func (c containment) cgroupOfStart(h *home, pid int) string {
	a := c.cgroupOfProc(pid)
	if filepath.Dir(a) == h.cgroup && strings.HasPrefix(filepath.Base(a), "run-") {
		return a
	}
	return h.cgroup
}

// cgOpen creates the cgroup dir if needed and opens it for
// CLONE_INTO_CGROUP: a child then starts inside it, with no moment
// outside in which it could fork.
func cgOpen(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, fmt.Errorf("home cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("home cgroup: %w", err)
	}
	return fd, nil
}
