package execprov

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/orphans"
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

// chooseContainment detects what the machine offers and sets up the mode
// asked for; dataDir names this gateway's cgroup, so that two gateways
// on one machine keep their homes apart.
func chooseContainment(want Containment, dataDir string) (containment, error) {
	var root, what string
	err := errors.New("containment subreaper chosen in the config")
	if want != ContainSubreaper {
		root, what, err = cgroup.Root(dataDir)
	}
	if err == nil {
		mount, mroot, _ := cgroup.Mount()
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

// left returns the live processes of home h as its containment sees
// them (nil when none): the members of cgroup cg (h's own, or the one of
// one of its starts), or the orphans of h the gateway adopted, leaving out
// p when it is the gateway's child.
func (e *Provider) left(h *home, p *proc, cg string) []int {
	switch e.contain.mode {
	case ContainCgroup:
		if pop, err := cgroup.Populated(cg); err != nil || !pop {
			if err != nil {
				e.log.Warn("exec: reading the home's cgroup", "home", h.id, "err", err)
				return []int{-1}
			}
			return nil
		}
		pids, _ := cgroup.ProcsTree(cg)
		if len(pids) == 0 {
			return []int{-1} // populated, though not one pid is listed yet
		}
		return pids
	case ContainSubreaper:
		e.mu.Lock()
		signalled := h.orphans
		e.mu.Unlock()
		orphans.ReapOrphans(signalled)
		// An adopted process on its way out may be h's, and may still
		// hold the home's files and port: it counts until it is a zombie.
		scan := orphans.Find(EnvHome, h.id, pidOf(p), e.childPIDs(p))
		return append(scan.PIDs, scan.Exiting...)
	}
	return nil
}

// signalLeft sends sig to every process of h its containment knows in
// cgroup cg (see left), beyond p's process group (which signalGroup
// reaches).
func (e *Provider) signalLeft(h *home, p *proc, cg string, sig unix.Signal) {
	switch e.contain.mode {
	case ContainCgroup:
		if sig == unix.SIGKILL {
			if err := cgroup.Kill(cg); err != nil {
				e.log.Warn("exec: killing the home's cgroup", "home", h.id, "err", err)
			}
			// cgroup.kill signals each process through its main thread;
			// one whose main thread has exited while others run on (see
			// lives) is not reached that way, while the signal to the
			// process below is.
		}
		pids, _ := cgroup.ProcsTree(cg)
		e.contain.cgSignal(pids, cg, sig)
	case ContainSubreaper:
		scan := orphans.Find(EnvHome, h.id, pidOf(p), e.childPIDs(p))
		pids := scan.PIDs
		if len(scan.Unknown) > 0 && sig == unix.SIGKILL {
			e.log.Warn("exec: the gateway adopted processes that name no home (their WAKEGATE_HOME was removed, "+
				"or they made their environment unreadable); not signalling them, and no stop is proven while they run",
				"home", h.id, "pids", scan.Unknown,
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

// endLeft ends what is left of home h outside process p's group (see
// left): SIGKILL, then a wait of up to StopGrace. It reports what was
// found, and whether anything is still there.
func (e *Provider) endLeft(h *home, p *proc, cg string) (found []int, remain bool) {
	found = e.left(h, p, cg)
	if len(found) == 0 {
		return nil, false
	}
	e.signalLeft(h, p, cg, unix.SIGKILL)
	deadline := time.Now().Add(e.cfg.StopGrace)
	for {
		now := e.left(h, p, cg)
		if e.contain.mode == ContainSubreaper {
			orphans.ReapOrphans(found)
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
func (e *Provider) Containment() (string, string) { return string(e.contain.mode), e.contain.why }

var _ provider.ContainmentReporter = (*Provider)(nil)

// cgroupDir is the cgroup of home id; "" without cgroups.
func (c containment) cgroupDir(id string) string {
	if c.mode != ContainCgroup {
		return ""
	}
	return filepath.Join(c.root, cgroup.Prefix+id)
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
	raw, err := sysfile.Read("/proc/" + strconv.Itoa(pid) + "/cgroup")
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
