package provider

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
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Containment says how the exec provider finds every process a home
// started, however it detached (setsid, a double fork, a daemon), so that a
// stop ends them all (design rule 29).
type Containment string

// Containment modes. The zero value is ContainAuto.
const (
	// ContainAuto uses a cgroup per home where the gateway may create one,
	// and a child subreaper otherwise.
	ContainAuto Containment = "auto"
	// ContainCgroup puts each home in a cgroup v2 of its own: every
	// process it starts stays in it, a stop ends them with cgroup.kill,
	// and a stop is proven once cgroup.events says "populated 0". The
	// gateway refuses to start where it cannot create one.
	ContainCgroup Containment = "cgroup"
	// ContainSubreaper makes the gateway a child subreaper
	// (PR_SET_CHILD_SUBREAPER): a process that leaves its home's process
	// group and loses its parent becomes the gateway's child, and is
	// known as the home's by the WAKEGATE_HOME of its environment. A
	// process that rewrites that variable escapes it: only a cgroup
	// holds every process.
	ContainSubreaper Containment = "subreaper"
)

// ParseContainment reads a containment mode; "" is ContainAuto.
func ParseContainment(s string) (Containment, error) {
	switch c := Containment(s); c {
	case "", ContainAuto:
		return ContainAuto, nil
	case ContainCgroup, ContainSubreaper:
		return c, nil
	}
	return "", fmt.Errorf("containment %q: want auto, cgroup or subreaper", s)
}

// containment is what the provider chose at start, and why.
type containment struct {
	mode Containment // ContainCgroup or ContainSubreaper; "" for neither
	// root is the cgroup the homes' cgroups are made in (mode cgroup).
	root string
	// mount is where the cgroup v2 hierarchy is mounted, and mroot the
	// part of it mounted there (mode cgroup).
	mount, mroot string
	// why says what the machine offers and why mode was chosen, for the
	// log and status.
	why string
}

// cgroupPrefix names a home's cgroup under the root: no controller's
// interface file (memory.max, cgroup.procs, ...) starts with it, whatever
// the home's id.
const cgroupPrefix = "home-"

// chooseContainment detects what the machine offers and sets up the mode
// asked for; dataDir names this gateway's cgroup, so that two gateways
// on one machine keep their homes apart.
func chooseContainment(want Containment, dataDir string) (containment, error) {
	var root, what string
	err := errors.New("containment subreaper chosen in the config")
	if want != ContainSubreaper {
		root, what, err = cgroupRoot(dataDir)
	}
	if err == nil {
		mount, mroot, _ := cgroup2Mount()
		return containment{mode: ContainCgroup, root: root, mount: mount, mroot: mroot,
			why: what + "; each home runs in a cgroup of its own under " + root + ", and a stop ends it with cgroup.kill"}, nil
	}
	if want == ContainCgroup {
		return containment{}, fmt.Errorf("containment cgroup: %w; run the gateway as root on a machine with cgroup v2, or set exec.containment auto", err)
	}
	why := err.Error()
	if want != ContainSubreaper {
		why = "no cgroup per home: " + why
	}
	if perr := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); perr != nil {
		return containment{why: why + "; and PR_SET_CHILD_SUBREAPER failed (" + perr.Error() +
			"): only the home's process group is stopped, so a process that calls setsid escapes"}, nil
	}
	return containment{mode: ContainSubreaper, why: why + "; the gateway is a child subreaper: processes that leave a home's " +
		"process group are found among its own children by their WAKEGATE_HOME (one that rewrites it escapes)"}, nil
}

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

// orphans returns the live processes of home id that a child subreaper
// can find: the gateway's children whose environment names the home
// (WAKEGATE_HOME: processes that lost their parent and were adopted by
// the gateway), the descendants of those and of p, the home's process
// (setsid children of a live process are not in its group), leaving out
// the gateway's own home processes (skip) and p itself. unknown lists the
// gateway's adopted children that name no home at all: a process that
// rewrote its environment, which may be any home's. A child outside the
// gateway's process group is one: every home starts in a group of its
// own, while what else the gateway runs (os/exec's children) stays in
// the gateway's.
func orphans(id string, p int, skip map[int]bool) (pids, unknown []int) {
	self, group := os.Getpid(), unix.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	want := []byte(EnvHome + "=" + id)
	parent := map[int]int{}
	mine := map[int]bool{}
	if p > 0 {
		mine[p] = true
	}
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid == p {
			continue
		}
		raw, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		st, err := parseProcStat(raw)
		if err != nil || st.State == 'Z' || st.State == 'X' {
			continue
		}
		parent[pid] = st.PPid
		if st.PPid != self || skip[pid] {
			continue
		}
		env, err := os.ReadFile("/proc/" + en.Name() + "/environ")
		switch {
		case err != nil:
		case hasEnvEntry(env, want):
			mine[pid] = true
		case st.Pgrp != group && !hasEnvPrefix(env, []byte(EnvHome+"=")):
			unknown = append(unknown, pid)
		}
	}
	// The descendants of what is the home's are the home's.
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if !mine[pid] && mine[pp] && !skip[pid] {
				mine[pid], grew = true, true
			}
		}
	}
	for pid := range mine {
		if pid != p {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, unknown
}

// hasEnvPrefix reports whether a NUL-separated environment holds an entry
// that starts with prefix.
func hasEnvPrefix(env, prefix []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// hasEnvEntry reports whether a NUL-separated environment holds entry.
func hasEnvEntry(env, entry []byte) bool {
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// reapOrphans waits for the orphans in pids that have exited, so that
// none stays a zombie of the gateway. Only these pids are waited for:
// the gateway's other children belong to whoever started them.
func reapOrphans(pids []int) {
	for _, pid := range pids {
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG, nil)
	}
}

// left returns the live processes of home h as its containment sees
// them (nil when none): the members of cgroup cg (h's own, or the one of
// one of its starts), or the orphans of h the gateway adopted, leaving out
// p when it is the gateway's child.
func (e *Exec) left(h *home, p *proc, cg string) []int {
	switch e.contain.mode {
	case ContainCgroup:
		if pop, err := cgPopulated(cg); err != nil || !pop {
			if err != nil {
				e.log.Warn("exec: reading the home's cgroup", "home", h.id, "err", err)
				return []int{-1}
			}
			return nil
		}
		pids, _ := cgProcsTree(cg)
		if len(pids) == 0 {
			return []int{-1} // populated, though not one pid is listed yet
		}
		return pids
	case ContainSubreaper:
		e.mu.Lock()
		signalled := h.orphans
		e.mu.Unlock()
		reapOrphans(signalled)
		pids, _ := orphans(h.id, pidOf(p), e.childPIDs(p))
		return pids
	}
	return nil
}

// signalLeft sends sig to every process of h its containment knows in
// cgroup cg (see left), beyond p's process group (which signalGroup
// reaches).
func (e *Exec) signalLeft(h *home, p *proc, cg string, sig unix.Signal) {
	switch e.contain.mode {
	case ContainCgroup:
		if sig == unix.SIGKILL {
			if err := cgKill(cg); err != nil {
				e.log.Warn("exec: killing the home's cgroup", "home", h.id, "err", err)
			}
			return
		}
		pids, _ := cgProcsTree(cg)
		e.contain.cgSignal(pids, cg, sig)
	case ContainSubreaper:
		pids, unknown := orphans(h.id, pidOf(p), e.childPIDs(p))
		if len(unknown) > 0 && sig == unix.SIGKILL {
			e.log.Warn("exec: the gateway adopted processes that name no home (their WAKEGATE_HOME was removed); "+
				"not signalling them, and no stop is proven while they run", "home", h.id, "pids", unknown,
				"hint", "end them by hand, or run the gateway as root with cgroup v2 (exec.containment cgroup)")
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, sig)
		}
		// Remembered to be reaped once they exit (left); the list is
		// short-lived: a home has few detached processes.
		e.mu.Lock()
		for _, pid := range pids {
			if !slices.Contains(h.orphans, pid) {
				h.orphans = append(h.orphans, pid)
			}
		}
		if len(h.orphans) > 64 {
			h.orphans = h.orphans[len(h.orphans)-64:]
		}
		e.mu.Unlock()
	}
}

// unknownLeft lists the processes the gateway adopted as a subreaper that
// name no home (see orphans): one of them may be h's, so no stop of h is
// proven while one runs. nil without a subreaper.
func (e *Exec) unknownLeft(h *home, p *proc) []int {
	if e.contain.mode != ContainSubreaper {
		return nil
	}
	_, unknown := orphans(h.id, pidOf(p), e.childPIDs(p))
	return unknown
}

// pidOf is p's pid; 0 for none.
func pidOf(p *proc) int {
	if p == nil {
		return 0
	}
	return p.PID
}

// childPIDs are the pids of the processes the gateway started as homes
// (its direct children: their own watchers reap them), which the orphan
// scan leaves alone. p, which may not be installed yet, is one of them.
func (e *Exec) childPIDs(p *proc) map[int]bool {
	skip := map[int]bool{}
	if p != nil && p.cmd != nil {
		skip[p.PID] = true
	}
	e.mu.Lock()
	for _, h := range e.homes {
		if h.proc != nil && h.proc.cmd != nil {
			skip[h.proc.PID] = true
		}
	}
	e.mu.Unlock()
	return skip
}

// endLeft ends what is left of home h outside process p's group (see
// left): SIGKILL, then a wait of up to StopGrace. It reports what was
// found, and whether anything is still there.
func (e *Exec) endLeft(h *home, p *proc, cg string) (found []int, remain bool) {
	found = e.left(h, p, cg)
	if len(found) == 0 {
		return nil, false
	}
	e.signalLeft(h, p, cg, unix.SIGKILL)
	deadline := time.Now().Add(e.cfg.StopGrace)
	for {
		now := e.left(h, p, cg)
		if e.contain.mode == ContainSubreaper {
			reapOrphans(found)
		}
		if len(now) == 0 {
			return found, false
		}
		if time.Now().After(deadline) {
			return found, true
		}
		select {
		case <-time.After(procPollInterval):
		case <-e.done:
			return found, true
		}
	}
}

// Containment says how this provider keeps track of every process of a
// home (ContainCgroup or ContainSubreaper, "" for the process group
// alone) and why: what the machine offers.
func (e *Exec) Containment() (Containment, string) { return e.contain.mode, e.contain.why }

// ContainmentReporter is a provider that runs homes on this machine and
// can say how it finds every process a home starts.
type ContainmentReporter interface {
	// Containment is the mode and why it was chosen.
	Containment() (Containment, string)
}

var _ ContainmentReporter = (*Exec)(nil)

// Usage is what a home's processes use, read from its cgroup.
type Usage struct {
	// Processes is how many processes the home has now.
	Processes int `json:"processes"`
	// CPUSeconds is the CPU time its processes have used since its
	// cgroup was made (cpu.stat usage_usec), user and system.
	CPUSeconds float64 `json:"cpu_s"`
	// MemoryBytes is the memory its processes use now (memory.current);
	// omitted where the memory controller is not enabled for it.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// UsageReporter is a provider that can say what a home's processes use.
type UsageReporter interface {
	// Usage returns what home id uses now; ok is false when the provider
	// cannot tell (no cgroup per home, or the home has none).
	Usage(id string) (u Usage, ok bool)
}

// Usage reads what home id's processes use from its cgroup.
func (e *Exec) Usage(id string) (Usage, bool) {
	e.mu.Lock()
	h := e.homes[id]
	e.mu.Unlock()
	if h == nil || h.cgroup == "" {
		return Usage{}, false
	}
	raw, err := os.ReadFile(filepath.Join(h.cgroup, "cpu.stat"))
	if err != nil {
		return Usage{}, false
	}
	var u Usage
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			usec, _ := strconv.ParseInt(v, 10, 64)
			u.CPUSeconds = float64(usec) / 1e6
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.cgroup, "memory.current")); err == nil {
		u.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	pids, _ := cgProcsTree(h.cgroup)
	u.Processes = len(pids)
	return u, true
}

var _ UsageReporter = (*Exec)(nil)
