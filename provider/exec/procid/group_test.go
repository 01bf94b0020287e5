package procid

import (
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestGroupMembersSharesAScan: callers that ask while a scan runs share
// the next one, which begins after all of them asked, and each finds the
// members of its group.
func TestGroupMembersSharesAScan(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pgid := cmd.Process.Pid

	// A scan runs (its lock held here), and ten callers ask meanwhile.
	groupScans.run.Lock()
	before := groupScans.scans.Load()
	const callers = 10
	got := make(chan []int, callers)
	for range callers {
		go func() {
			m, err := GroupMembers(pgid)
			if err != nil {
				t.Error(err)
			}
			got <- m
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		groupScans.mu.Lock()
		n := 0
		if groupScans.pending != nil {
			n = groupScans.pending.callers
		}
		groupScans.mu.Unlock()
		if n == callers {
			break
		}
		if time.Now().After(deadline) {
			groupScans.run.Unlock()
			t.Fatalf("%d callers wait for the next scan, want %d", n, callers)
		}
		time.Sleep(time.Millisecond)
	}
	groupScans.run.Unlock()
	for range callers {
		if m := <-got; !slices.Equal(m, []int{pgid}) {
			t.Fatalf("members of group %d: %v, want the one process", pgid, m)
		}
	}
	if n := groupScans.scans.Load() - before; n != 1 {
		t.Errorf("%d callers at once took %d scans, want 1", callers, n)
	}
	if GroupGone(pgid) {
		t.Error("GroupGone says the live group is gone")
	}
}
