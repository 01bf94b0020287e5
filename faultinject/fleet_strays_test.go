package faultinject

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A gateway SIGKILLed between a home's start and its record leaves that
// process in its own cgroup, named by no record, while another gateway of
// the fleet runs the home. The next run of the killed gateway ends it. A
// process of its cgroup that a record does name (another gateway adopted
// it) is kept.
//
// The stray is placed by the test, in the killed gateway's cgroup for the
// home, as the killed spawn leaves it: the kill cannot be aimed at the
// microsecond between the start and the record from outside.
func TestFleetRestartEndsWhatNoRecordNames(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{wake: map[string]any{"warm_ttl": "1s", "retry_after": "1s"}})
	gw0, gw1 := gws[0], gws[1]
	root, _, err := cgroup.RootPath(gw0.data)
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Skipf("the gateway keeps no cgroup of its homes (not root, or no cgroup v2): %v", err)
	}
	c := fleetClient()

	// gw-1 runs h1, in its own cgroup.
	if res, body, err := gw1.get(c, fiWhoami); err != nil || res.StatusCode != 200 {
		t.Fatalf("wake through gw-1: %v %v %s", err, res, body)
	}
	pids := fleetHomePIDs(t, gws, fiHome)
	if len(pids) != 1 {
		t.Fatalf("home processes %v after the wake, want one", pids)
	}
	home := pids[0]

	// gw-0 dies; what its killed start left runs on in its cgroup.
	gw0.kill(t)
	stray := plantStray(t, filepath.Join(root, cgroup.Prefix+fiHome, "start-killed"))
	gw0.start(t)
	testbin.Eventually(t, "gw-0's new run to end the stray and say so", func() bool {
		out := gw0.Output()
		return !alive(stray) && strings.Contains(out, "no record names") && strings.Contains(out, strconv.Itoa(stray))
	})
	if res, body, err := gw0.get(c, fiWhoami); err != nil || res.StatusCode != 200 {
		t.Fatalf("h1 through gw-0 after its restart: %v %v %s", err, res, body)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); !slices.Equal(pids, []int{home}) {
		t.Fatalf("home processes %v after gw-0's restart, want gw-1's %d alone", pids, home)
	}

	// gw-1 dies; gw-0 adopts its process, which stays in gw-1's cgroup.
	gw1.kill(t)
	store := openFleetStore(t, srv)
	if !testbin.Poll(time.Minute, 100*time.Millisecond, func() bool {
		res, _, err := gw0.get(c, fiWhoami)
		h, gerr := store.GetHome(context.Background(), fiHome)
		return err == nil && res.StatusCode == 200 && gerr == nil && h.Runner == "gw-0"
	}) {
		t.Fatalf("gw-0 never took h1 over after gw-1 died:\n%s", gw0.Output())
	}
	if pids := fleetHomePIDs(t, gws, fiHome); !slices.Equal(pids, []int{home}) {
		t.Fatalf("home processes %v after the takeover, want the adopted %d", pids, home)
	}
	// gw-1's new run finds that process in its cgroup, named by the
	// record gw-0 wrote: it is kept.
	gw1.start(t)
	testbin.Eventually(t, "gw-1's new run to look at its cgroup", func() bool {
		return strings.Contains(gw1.Output(), "kept for adoption")
	})
	if !alive(home) {
		t.Fatalf("gw-1's new run ended %d, the home's process gw-0 adopted:\n%s", home, gw1.Output())
	}
	if res, body, err := gw1.get(c, fiWhoami); err != nil || res.StatusCode != 200 {
		t.Fatalf("h1 through gw-1 after its restart: %v %v %s", err, res, body)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); !slices.Equal(pids, []int{home}) {
		t.Fatalf("home processes %v after gw-1's restart, want %d alone", pids, home)
	}
}

// plantStray starts a process in cgroup dir (made for it) and returns its
// pid; it is killed and reaped when the test ends.
func plantStray(t *testing.T, dir string) int {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatalf("placing the stray in %s: %v", dir, err)
	}
	return cmd.Process.Pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	s := testbin.ProcState(pid)
	return s != 0 && s != 'Z'
}
