package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider"
)

// Limits of a home's memory and CPU (HomeOptions.MemoryMax, CPUMax). They
// need a cgroup per home (containment cgroup) and the kernel's memory or
// cpu controller for it: cgroup v2's own controllers where the gateway's
// cgroup hands them down (a machine with cgroup v2 alone), and otherwise
// the cgroup v1 memory and cpu hierarchies of a hybrid machine, in which
// the provider makes a cgroup of the home beside its v2 one and moves every
// process of each start into it.

// cpuPeriod is the period of a CPU limit, in microseconds: a home with
// cpu_max 0.5 runs at most 50 ms in each 100 ms.
const cpuPeriod = 100000

// Limits are the limits a home's options set; zero: none.
type Limits struct {
	Memory int64   // bytes
	CPU    float64 // cores
	Pids   int64   // processes and threads at once
}

// Any reports whether l limits memory or CPU, which need a cgroup.
func (l Limits) Any() bool { return l.Memory > 0 || l.CPU > 0 }

// hasController reports whether cgroup v2 dir may hand controller ctl to
// its children.
func hasController(dir, ctl string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return false
	}
	for _, c := range strings.Fields(string(raw)) {
		if c == ctl {
			return true
		}
	}
	return false
}

// v1Dir is the gateway's own cgroup in the cgroup v1 hierarchy of
// controller ctl.
func v1Dir(ctl string) (string, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("cgroup v1 %s: %w", ctl, err)
	}
	var mount, mroot string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" {
			continue
		}
		for o := range strings.SplitSeq(g[2], ",") {
			if o == ctl {
				mount, mroot = f[4], f[3]
			}
		}
	}
	if mount == "" {
		return "", fmt.Errorf("no cgroup v1 %s hierarchy is mounted", ctl)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup v1 %s: %w", ctl, err)
	}
	for line := range strings.SplitSeq(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == ctl {
				rel, ok := strings.CutPrefix(parts[2], mroot)
				if !ok {
					return "", fmt.Errorf("cgroup v1 %s: the gateway's cgroup %s is outside the mounted part %s", ctl, parts[2], mroot)
				}
				return filepath.Join(mount, rel), nil
			}
		}
	}
	return "", fmt.Errorf("cgroup v1 %s: the gateway is in no cgroup of it", ctl)
}

// Support is how this gateway limits its homes, set up at start.
type Support struct {
	// memV2 and cpuV2: the controller is enabled for the homes' cgroups
	// v2 (their limits are written there).
	memV2, cpuV2 bool
	// memV1 and cpuV1: the cgroup v1 directory the homes' cgroups of
	// that controller are made in; "" when none.
	memV1, cpuV1 string
	// memWhy and cpuWhy say why a limit cannot be had; "" when it can.
	memWhy, cpuWhy string
	// pidsV2, pidsV1 and pidsWhy: the same for the process cap, which
	// falls back to RLIMIT_NPROC where neither is had.
	pidsV2  bool
	pidsV1  string
	pidsWhy string
}

// Unsupported is the Support of homes without a cgroup each: no limit
// but the process cap's RLIMIT_NPROC, for the reason why.
func Unsupported(why string) Support {
	return Support{memWhy: why, cpuWhy: why, pidsWhy: why}
}

// SetUp finds how the memory, CPU and processes of homes whose cgroups
// are made under root can be limited: the v2 controller where root may
// enable it, the v1 hierarchy otherwise.
func SetUp(root string) Support {
	var s Support
	for _, ctl := range []string{"memory", "cpu", "pids"} {
		v2, v1, why := false, "", ""
		if hasController(root, ctl) {
			err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+"+ctl), 0)
			v2 = err == nil
			if err != nil {
				why = fmt.Sprintf("cgroup v2 %s controller: %v", ctl, err)
			}
		}
		if !v2 {
			// The directory is made with the first home's limit (apply),
			// so a gateway without limits leaves the v1 hierarchy alone.
			dir, err := v1Dir(ctl)
			if err == nil {
				if aerr := unix.Access(dir, unix.W_OK); aerr != nil {
					err = fmt.Errorf("cgroup v1 %s: %s: %w", ctl, dir, aerr)
				}
				dir = filepath.Join(dir, filepath.Base(root))
			}
			if err == nil {
				v1, why = dir, ""
			} else if why == "" {
				why = fmt.Sprintf("no cgroup v2 %s controller for the homes' cgroups, and %v", ctl, err)
			}
		}
		switch ctl {
		case "memory":
			s.memV2, s.memV1, s.memWhy = v2, v1, why
		case "cpu":
			s.cpuV2, s.cpuV1, s.cpuWhy = v2, v1, why
		default:
			s.pidsV2, s.pidsV1, s.pidsWhy = v2, v1, why
		}
		if v1 != "" {
			removeEmpty(v1)
		}
	}
	return s
}

// removeEmpty removes the empty cgroups v1 of homes under root, left by
// homes that ended while no gateway ran (as Root does for v2); a
// cgroup with a process stays.
func removeEmpty(root string) {
	ents, _ := os.ReadDir(root)
	for _, en := range ents {
		if en.IsDir() && strings.HasPrefix(en.Name(), Prefix) {
			_ = unix.Rmdir(filepath.Join(root, en.Name()))
		}
	}
}

// apply writes home h's limits lim (none: no limit) into its cgroups,
// before a start: its cgroup v2 dir exists. A limit the machine
// cannot enforce fails the start.
func (s Support) Apply(dir, id string, lim Limits) error {
	if dir == "" {
		if lim.Any() {
			return fmt.Errorf("memory_max and cpu_max need a cgroup per home: %s", s.memWhy)
		}
		return nil
	}
	mem, cpuQuota := "max", "max"
	mem1, cpu1 := "-1", "-1"
	if lim.Memory > 0 {
		mem, mem1 = strconv.FormatInt(lim.Memory, 10), strconv.FormatInt(lim.Memory, 10)
	}
	if lim.CPU > 0 {
		q := max(int64(lim.CPU*cpuPeriod), 1000)
		cpuQuota, cpu1 = strconv.FormatInt(q, 10), strconv.FormatInt(q, 10)
	}
	switch {
	case s.memV2:
		if err := writeCg(dir, "memory.max", mem); err != nil {
			return err
		}
		// No swap beyond the limit, where the kernel counts swap apart.
		swap := "max"
		if lim.Memory > 0 {
			swap = "0"
		}
		_ = writeCg(dir, "memory.swap.max", swap)
	case s.memV1 != "":
		dir := filepath.Join(s.memV1, Prefix+id)
		if lim.Memory > 0 || exists(dir) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("memory_max: %w", err)
			}
			// memsw (memory and swap) may not go below the memory limit:
			// raised first, set after.
			_ = writeCg(dir, "memory.memsw.limit_in_bytes", "-1")
			if err := writeCg(dir, "memory.limit_in_bytes", mem1); err != nil {
				return err
			}
			_ = writeCg(dir, "memory.memsw.limit_in_bytes", mem1)
		}
	case lim.Memory > 0:
		return fmt.Errorf("memory_max: %s", s.memWhy)
	}
	switch {
	case s.cpuV2:
		if err := writeCg(dir, "cpu.max", cpuQuota+" "+strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
	case s.cpuV1 != "":
		dir := filepath.Join(s.cpuV1, Prefix+id)
		if lim.CPU > 0 || exists(dir) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("cpu_max: %w", err)
			}
			if err := writeCg(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
				return err
			}
			if err := writeCg(dir, "cpu.cfs_quota_us", cpu1); err != nil {
				return err
			}
		}
	case lim.CPU > 0:
		return fmt.Errorf("cpu_max: %s", s.cpuWhy)
	}
	pids := "max"
	if lim.Pids > 0 {
		pids = strconv.FormatInt(lim.Pids, 10)
	}
	switch {
	case s.pidsV2:
		if err := writeCg(dir, "pids.max", pids); err != nil {
			return err
		}
	case s.pidsV1 != "":
		dir := filepath.Join(s.pidsV1, Prefix+id)
		if lim.Pids > 0 || exists(dir) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("pids_max: %w", err)
			}
			if err := writeCg(dir, "pids.max", pids); err != nil {
				return err
			}
		}
	}
	return nil
}

// V1 reports whether a start moves its home into any cgroup v1
// hierarchy (Enter, EnterStopped).
func (s Support) V1() bool { return s.memV1 != "" || s.cpuV1 != "" || s.pidsV1 != "" }

// pidsInCgroup reports whether h's process cap is its cgroup's (v2 or
// v1); otherwise it is RLIMIT_NPROC of its uid (CapNproc).
func (s Support) PidsInCgroup(dir string) bool {
	return dir != "" && (s.pidsV2 || s.pidsV1 != "")
}

// CapNproc sets RLIMIT_NPROC of a home's first process pid, for a home
// with a uid of its own and no pids cgroup: it counts every process and
// thread of that uid, which are the home's alone. It is set as the
// process starts, before its program can have forked much: children it
// forked first (within microseconds of the start) are not held by it,
// but their own forks count against it.
func CapNproc(pid int, n int64) error {
	if n <= 0 {
		return nil
	}
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil); err != nil {
		return fmt.Errorf("RLIMIT_NPROC of pid %d: %w", pid, err)
	}
	return nil
}

// enter moves every process of a start (the members of its cgroup v2 run)
// into home h's cgroups v1, after the start: a v1 hierarchy cannot take a
// child at its clone, as v2 does. A process forked by one not moved yet
// is in run too, and is moved by the next pass; a pass that moves nothing
// leaves every process inside, and whatever they start after stays there.
func (s Support) Enter(id, run string) error {
	dirs := s.v1Dirs(id)
	if len(dirs) == 0 || run == "" {
		return nil
	}
	for range 100 {
		pids, err := Procs(run)
		if err != nil {
			return err
		}
		moved := false
		for _, dir := range dirs {
			in, _ := Procs(dir)
			for _, pid := range pids {
				if containsPID(in, pid) {
					continue
				}
				err := sysfile.Write(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)))
				switch {
				case err == nil:
					moved = true
				case errors.Is(err, unix.ESRCH):
					// Gone, or exiting while still listed in run: nothing
					// to hold, and no reason for another pass (a home that
					// exits at once must not read as a fork storm).
				default:
					return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
				}
			}
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("the home's processes in %s keep forking faster than they can be moved into their limits", run)
}

// EnterStopped moves pid, the only process of a start, stopped before its
// program's first instruction (a traced start), into home h's cgroups v1:
// it cannot have forked, so that one write to each places the whole home
// inside its limits before it runs, and Enter has nothing left to do.
func (s Support) EnterStopped(id string, pid int) error {
	for _, dir := range s.v1Dirs(id) {
		err := sysfile.Write(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)))
		if err != nil {
			return fmt.Errorf("move pid %d into %s: %w", pid, dir, err)
		}
	}
	return nil
}

// v1Dirs are home id's cgroups in the v1 hierarchies Apply made them in.
func (s Support) v1Dirs(id string) []string {
	var dirs []string
	for _, root := range []string{s.memV1, s.cpuV1, s.pidsV1} {
		if root != "" && exists(filepath.Join(root, Prefix+id)) {
			dirs = append(dirs, filepath.Join(root, Prefix+id))
		}
	}
	return dirs
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// oomKills is how many times the kernel killed a process of home h for
// going over its memory limit; -1 when unknown.
func (s Support) OOMKills(dir, id string) int64 {
	var file, key string
	switch {
	case dir == "":
		return -1
	case s.memV2:
		file, key = filepath.Join(dir, "memory.events"), "oom_kill "
	case s.memV1 != "":
		file, key = filepath.Join(s.memV1, Prefix+id, "memory.oom_control"), "oom_kill "
	default:
		return -1
	}
	return statField(file, key)
}

// statField reads the number after key in a cgroup file of "key value"
// lines; -1 when there is none.
func statField(file, key string) int64 {
	raw, err := sysfile.Read(file)
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// usage adds to u what h's limits and their cgroups say: the limits, the
// memory in use where v2 does not count it, CPU throttling, OOM kills.
func (s Support) Usage(dir, id string, lim Limits, u *provider.Usage) {
	u.MemoryMaxBytes, u.CPUMax, u.PidsMax = lim.Memory, lim.CPU, lim.Pids
	if lim.Pids > 0 && dir != "" {
		u.PidsCap = "rlimit_nproc"
		switch {
		case s.pidsV2:
			u.PidsCap = "cgroup"
		case s.pidsV1 != "":
			u.PidsCap = "cgroup_v1"
		}
	}
	if n := s.OOMKills(dir, id); n > 0 {
		u.OOMKills = n
	}
	switch {
	case s.memV1 != "" && !s.memV2:
		if n := statField(filepath.Join(s.memV1, Prefix+id, "memory.usage_in_bytes"), ""); n >= 0 {
			u.MemoryBytes = n
		}
	}
	switch {
	case s.cpuV2:
		u.CPUThrottled = statField(filepath.Join(dir, "cpu.stat"), "nr_throttled ")
		if us := statField(filepath.Join(dir, "cpu.stat"), "throttled_usec "); us > 0 {
			u.CPUThrottledSeconds = float64(us) / 1e6
		}
	case s.cpuV1 != "":
		dir := filepath.Join(s.cpuV1, Prefix+id)
		u.CPUThrottled = statField(filepath.Join(dir, "cpu.stat"), "nr_throttled ")
		if ns := statField(filepath.Join(dir, "cpu.stat"), "throttled_time "); ns > 0 {
			u.CPUThrottledSeconds = float64(ns) / 1e9
		}
	}
	u.CPUThrottled = max(u.CPUThrottled, 0)
}

// remove removes the homes' empty cgroups v1 and their roots, at Close.
func (s Support) RemoveHomes(ids []string) {
	for _, root := range []string{s.memV1, s.cpuV1, s.pidsV1} {
		if root == "" {
			continue
		}
		for _, id := range ids {
			_ = unix.Rmdir(filepath.Join(root, Prefix+id))
		}
		_ = unix.Rmdir(root)
	}
}

func writeCg(dir, file, v string) error {
	if err := sysfile.Write(filepath.Join(dir, file), []byte(v)); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Offered says why this machine cannot limit a home with controller ctl
// ("memory" or "cpu") in a cgroup of its own, "" when it can: what SetUp
// would find for a gateway that makes the homes' cgroups in its own.
func Offered(ctl string) string {
	fix := fmt.Sprintf("run the gateway as root on a machine with cgroup v2 and its %s controller (or a cgroup v1 %s hierarchy), "+
		"or remove the limit", ctl, ctl)
	mount, mroot, err := Mount()
	if err != nil {
		return "a limit needs a cgroup per home, and this machine has no cgroup v2: " + fix
	}
	own, err := Own()
	if err != nil {
		return "a limit needs a cgroup per home: " + err.Error() + "; " + fix
	}
	dir := filepath.Join(mount, strings.TrimPrefix(own, mroot))
	if unix.Access(dir, unix.W_OK) != nil {
		return "a limit needs a cgroup per home, and the gateway may not create one in " + dir + ": " + fix
	}
	if hasController(dir, ctl) {
		return ""
	}
	if v1, err := v1Dir(ctl); err == nil && unix.Access(v1, unix.W_OK) == nil {
		return ""
	}
	return fmt.Sprintf("this machine offers no %s controller for a home's cgroup (none in %s, and no writable cgroup v1 %s hierarchy): %s",
		ctl, filepath.Join(dir, "cgroup.controllers"), ctl, fix)
}
