package execprov

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/orphans"
	"github.com/wakegate/wakegate/provider/exec/procid"

	"github.com/wakegate/wakegate/internal/testbin"
)

// detachStyles are home commands whose process starts a child that leaves
// the home's process group and session, each its own way, writes that
// child's pid to {data_dir}/detached, then becomes the test home. The
// child ignores SIGTERM ("stubborn"), so only a SIGKILL that finds it ends
// it.
var detachStyles = map[string]string{
	"setsid":      `setsid "$0" stubborn & echo $! > {data_dir}/detached.tmp`,
	"double-fork": `( setsid "$0" stubborn & echo $! > {data_dir}/detached.tmp ) & wait`,
	"nohup":       `nohup setsid "$0" stubborn >/dev/null 2>&1 & echo $! > {data_dir}/detached.tmp`,
	// Its main thread exits: /proc shows a zombie, with no environment.
	"headless": `setsid "$0" headless & echo $! > {data_dir}/detached.tmp`,
}

// detachCommand is the command of a home that detaches a child the way
// style says.
func detachCommand(style string) []string {
	return []string{"/bin/sh", "-c", detachStyles[style] +
		`; mv {data_dir}/detached.tmp {data_dir}/detached; exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
}

// detached waits for the pid the home wrote and returns that process,
// which the test kills at its end whatever happens.
func detached(t *testing.T, dir, id string) procid.Stat {
	t.Helper()
	var pid int
	testbin.Eventually(t, "the home to write the pid of its detached child", func() bool {
		raw, err := os.ReadFile(filepath.Join(dir, "homes", id, "detached"))
		if err != nil {
			return false
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
			t.Fatalf("detached pid %q: %v", raw, err)
		}
		return true
	})
	st, err := rawStat(pid)
	if err != nil {
		t.Fatalf("the detached child %d: %v", pid, err)
	}
	t.Cleanup(func() { killIfSame(t, st.PID, st.Start) })
	// Until the child ignores SIGTERM it is still on its way (setsid,
	// nohup, env): a stop that ended it then would prove nothing.
	testbin.Eventually(t, "the detached child to ignore SIGTERM", func() bool { return ignoresTERM(pid) })
	return st
}

// ignoresTERM reports whether pid ignores SIGTERM (SigIgn in its status).
func ignoresTERM(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(15-1)) != 0
		}
	}
	return false
}

// containModes are the containments this machine offers to a test.
func containModes(t *testing.T) []Containment {
	modes := []Containment{ContainSubreaper}
	if cgroupsHere(t) {
		modes = append([]Containment{ContainCgroup}, modes...)
	}
	return modes
}

// cgroupsHere reports whether the gateway may make a cgroup per home here.
func cgroupsHere(t *testing.T) bool {
	root, _, err := cgroup.Root(t.TempDir())
	cgroup.Remove(root)
	if err != nil {
		t.Logf("no cgroup per home here: %v", err)
	}
	return err == nil
}

// noCgroupLeft fails the test when the provider's cgroup is still there
// after Close: every cgroup a test makes is removed.
func noCgroupLeft(t *testing.T, e *Provider) {
	t.Helper()
	if root := e.contain.root; root != "" {
		t.Cleanup(func() {
			e.Close()
			if _, err := os.Stat(root); err == nil {
				t.Errorf("cgroup %s is left behind", root)
				cgroup.Remove(root)
			}
		})
	}
}

// TestDetachedChildrenStopped runs homes whose process starts a child
// that leaves its process group (setsid, a double fork, nohup): a stop,
// the idle suspend of a home without suspend_signal, and the gateway's
// shutdown (Quiesce) end that child too, and only then say proven.
func TestDetachedChildrenStopped(t *testing.T) {
	for _, mode := range containModes(t) {
		for _, style := range []string{"setsid", "double-fork", "nohup", "headless"} {
			for _, end := range []string{"stop", "shutdown"} {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, style, end), func(t *testing.T) {
					dir := testDataDir(t)
					cfg := testConfig(dir)
					cfg.Command = detachCommand(style)
					cfg.Containment = mode
					cfg.StopGrace = 300 * time.Millisecond
					e := newExec(t, cfg)
					noCgroupLeft(t, e)
					s := provider.Spec{ID: "h1", Version: "v1"}
					r := wake(t, e, s)
					waitReady(t, r.Endpoint)
					child := detached(t, dir, "h1")
					if style == "headless" {
						testbin.Eventually(t, "the child's main thread to exit", func() bool { return headless(child.PID) })
					}
					if st, err := rawStat(child.PID); err != nil || st.Pgrp == mustRef(t, r).PID {
						t.Fatalf("the child %+v, %v did not leave the home's process group", st, err)
					}
					var proven bool
					var err error
					if end == "stop" {
						s.Ref = r.Ref
						proven, err = e.Stop(context.Background(), s)
					} else {
						q := e.Quiesce(context.Background(), nil)
						if len(q) != 1 {
							t.Fatalf("Quiesce = %+v, want one home", q)
						}
						proven, err = q[0].Proven, q[0].Err
					}
					if err != nil || !proven {
						t.Fatalf("%s = %v, %v; want proven", end, proven, err)
					}
					if running(child.Identity) {
						t.Fatalf("the detached child %d runs on after a proven %s (%s)", child.PID, end, whyUnseen(child.PID, "h1"))
					}
				})
			}
		}
	}
}

// whyUnseen says what the orphan scan sees of pid: its parent (the
// gateway's own pid is the subreaper's), state and whether its
// environment names home id.
func whyUnseen(pid int, id string) string {
	st, err := procid.ReadStat(pid)
	if err != nil {
		return err.Error()
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return fmt.Sprintf("parent %d (the gateway is %d), state %c, group %d, environ %d bytes (%v) naming the home: %v",
		st.PPid, os.Getpid(), st.State, st.Pgrp, len(env), err, orphans.HasEntry(env, []byte(EnvHome+"="+id)))
}

// TestDetachedChildOfExitedHomeEnded runs a home whose process exits on
// its own and leaves a detached child: the restart ends that child first,
// so that it cannot hold the home's files or port next to the new one.
func TestDetachedChildOfExitedHomeEnded(t *testing.T) {
	for _, mode := range containModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			dir := testDataDir(t)
			ch := newChanges()
			cfg := testConfig(dir)
			cfg.Command = detachCommand("setsid")
			cfg.Containment = mode
			cfg.StopGrace = 300 * time.Millisecond
			cfg.OnChange = ch.onChange
			e := newExec(t, cfg)
			noCgroupLeft(t, e)
			s := provider.Spec{ID: "h1", Version: "v1"}
			r := wake(t, e, s)
			waitReady(t, r.Endpoint)
			child := detached(t, dir, "h1")
			if err := os.Remove(filepath.Join(dir, "homes", "h1", "detached")); err != nil {
				t.Fatal(err)
			}
			exitHome(r.Endpoint, 3)
			nr := ch.next(t)
			if nr.State != provider.StateRunning {
				t.Fatalf("after the exit: %+v, want a restart", nr)
			}
			detached(t, dir, "h1") // the restart's own child
			if running(child.Identity) {
				t.Fatalf("the first start's detached child %d runs on next to the restart", child.PID)
			}
			s.Ref = nr.Ref
			if proven, err := e.Stop(context.Background(), s); err != nil || !proven {
				t.Fatalf("Stop = %v, %v; want proven", proven, err)
			}
		})
	}
}

// TestSubreaperHonestAboutUnknownProcess runs, under a subreaper, a home
// that detaches a child and removes WAKEGATE_HOME from its environment:
// nothing then ties it to a home, so the stop must not say proven while
// it runs.
func TestSubreaperHonestAboutUnknownProcess(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = []string{"/bin/sh", "-c", `env -u WAKEGATE_HOME setsid "$0" stubborn & echo $! > {data_dir}/detached.tmp; ` +
		`mv {data_dir}/detached.tmp {data_dir}/detached; exec "$0" home -port={port} -version={version} -data={data_dir}`, "{self}"}
	cfg.Containment = ContainSubreaper
	cfg.StopGrace = 200 * time.Millisecond
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	child := detached(t, dir, "h1")
	s.Ref = r.Ref
	proven, err := e.Stop(context.Background(), s)
	if proven || err == nil {
		t.Fatalf("Stop = %v, %v while the detached child %d runs; want not proven, with the cause", proven, err, child.PID)
	}
	if !strings.Contains(err.Error(), "name no home") {
		t.Errorf("Stop's error %q does not say why", err)
	}
	if !running(child.Identity) {
		t.Fatal("the child the gateway cannot attribute is gone: the test proves nothing")
	}
	killIfSame(t, child.PID, child.Start)
	if proven, err := e.Stop(context.Background(), s); err != nil || !proven {
		t.Fatalf("Stop once the child is gone = %v, %v; want proven", proven, err)
	}
}

// TestContainmentChosen checks what each mode asked for gives on this
// machine, and that status has the reason.
func TestContainmentChosen(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	e := newExec(t, cfg)
	noCgroupLeft(t, e)
	mode, why := e.Containment()
	if cgroupsHere(t) {
		if mode != string(ContainCgroup) || !strings.Contains(why, "cgroup") {
			t.Errorf("auto on a machine with cgroups = %q (%s), want cgroup", mode, why)
		}
	} else if mode != string(ContainSubreaper) {
		t.Errorf("auto without cgroups = %q (%s), want subreaper", mode, why)
	}
	if why == "" {
		t.Error("no reason given")
	}
	if _, err := ParseContainment("jail"); err == nil {
		t.Error("an unknown containment is accepted")
	}
}

// TestAdoptedHomeStoppedWithDetachedChild leaves a home with a detached
// child running across a gateway restart (keep_running_on_shutdown): the
// next gateway adopts it, and its stop ends the child too.
func TestAdoptedHomeStoppedWithDetachedChild(t *testing.T) {
	if !cgroupsHere(t) {
		t.Skip("a subreaper does not outlive the gateway: only a cgroup ties the child to the home across a restart")
	}
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = detachCommand("setsid")
	cfg.StopGrace = 300 * time.Millisecond
	first := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, first, s)
	waitReady(t, r.Endpoint)
	child := detached(t, dir, "h1")
	first.Close()

	second := newExec(t, cfg)
	noCgroupLeft(t, second)
	s.Ref = r.Ref
	// Adopted: the same process (its record now names the program the
	// shell exec'd, not the shell).
	if ar := wake(t, second, s); mustRef(t, ar).PID != mustRef(t, r).PID || mustRef(t, ar).Start != mustRef(t, r).Start {
		t.Fatalf("the restarted gateway started a new process (%s) instead of adopting %s", ar.Ref, r.Ref)
	}
	if proven, err := second.Stop(context.Background(), s); err != nil || !proven {
		t.Fatalf("Stop of the adopted home = %v, %v; want proven", proven, err)
	}
	if running(child.Identity) {
		t.Fatalf("the adopted home's detached child %d runs on after a proven stop", child.PID)
	}
}

// TestUsageFromCgroup reads what a running home uses from its cgroup: its
// processes (the home and its detached child) and CPU time.
func TestUsageFromCgroup(t *testing.T) {
	if !cgroupsHere(t) {
		t.Skip("no cgroup per home here")
	}
	dir := testDataDir(t)
	cfg := testConfig(dir)
	cfg.Command = detachCommand("setsid")
	e := newExec(t, cfg)
	noCgroupLeft(t, e)
	s := provider.Spec{ID: "h1", Version: "v1"}
	if _, ok := e.Usage("h1"); ok {
		t.Error("usage of a home never started")
	}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	detached(t, dir, "h1")
	u, ok := e.Usage("h1")
	if !ok || u.Processes != 2 || u.CPUSeconds <= 0 {
		t.Errorf("Usage = %+v, %v; want the home and its child, and some CPU time", u, ok)
	}
	s.Ref = r.Ref
	if proven, err := e.Stop(context.Background(), s); err != nil || !proven {
		t.Fatalf("Stop = %v, %v", proven, err)
	}
}

// TestDetachedChildOfOwnUserStopped runs, under a root gateway, a home as
// a user of its own that detaches a child: the child stays in the home's
// cgroup (a home's user cannot move it out) and the stop ends it.
func TestDetachedChildOfOwnUserStopped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root starts processes as other users")
	}
	for _, mode := range containModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			dir := testDataDir(t)
			openToOthers(t, dir)
			cfg := testConfig(dir)
			cfg.Command = detachCommand("setsid")
			cfg.Command[len(cfg.Command)-1] = selfForOthers(t)[0]
			cfg.Users = Users{Mode: UsersDynamic}
			cfg.Containment = mode
			cfg.StopGrace = 300 * time.Millisecond
			e := newExec(t, cfg)
			noCgroupLeft(t, e)
			s := provider.Spec{ID: "h1", Version: "v1"}
			r := wake(t, e, s)
			waitReady(t, r.Endpoint)
			child := detached(t, dir, "h1")
			if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", child.PID)); err != nil || strings.Contains(string(raw), "\nUid:\t0\t") {
				t.Fatalf("the detached child runs as root or is gone (%v)", err)
			}
			s.Ref = r.Ref
			if proven, err := e.Stop(context.Background(), s); err != nil || !proven {
				t.Fatalf("Stop = %v, %v; want proven", proven, err)
			}
			if running(child.Identity) {
				t.Fatalf("the detached child %d of a home with its own user runs on after a proven stop", child.PID)
			}
		})
	}
}
