package faultinject

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// A gateway killed (SIGKILL) in the middle of a wake held its lifecycle
// lock in memory. The next gateway on the same data_dir finds no lock to
// wait for (no other process has the store open: bbolt's file lock), says
// that the last gateway did not stop cleanly, and adopts the booting home:
// one home process, and the first request after the restart is answered
// once the boot is done, not after the dead gateway's lease runs out.
func TestCrashMidWakeRestartAdoptsAtOnce(t *testing.T) {
	const boot = 2 * time.Second
	const readyTimeout = 10 * time.Second
	g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{boot: boot.String(), admin: true,
		wake: map[string]any{"ready_timeout": readyTimeout.String(), "wake_timeout": "30s"}}))
	// The first request starts the wake; it is cut by the kill.
	go func() {
		c := &http.Client{Timeout: 30 * time.Second}
		_, _, _ = g.get(c, fiWhoami)
	}()
	var pid int
	testbin.Eventually(t, "the home process to start", func() bool {
		pids := g.homePIDs(t, fiHome)
		if len(pids) == 1 {
			pid = pids[0]
		}
		return pid != 0
	})
	started := time.Now()
	// Positioning the kill, not waiting for an outcome: 1 s into the boot.
	time.Sleep(time.Second)
	g.kill(t)
	killedAt := time.Since(started)
	g.start(t)
	c := &http.Client{Timeout: 60 * time.Second}
	t0 := time.Now()
	res, body, err := g.get(c, fiWhoami)
	took := time.Since(t0)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("first request after the restart: %v %v %s", err, res, body)
	}
	t.Logf("killed %s into a %s boot; the first request after the restart was answered in %s (the boot's remainder: %s)",
		killedAt.Round(time.Millisecond), boot, took.Round(time.Millisecond), (boot - killedAt).Round(time.Millisecond))
	// The generous bound: well before the ready timeout. The lease the
	// dead gateway left would have held the request for longer.
	if took >= readyTimeout {
		t.Fatalf("the first request took %s, not under the ready timeout %s: the dead gateway's lock held it", took, readyTimeout)
	}
	if pids := g.homePIDs(t, fiHome); len(pids) != 1 || pids[0] != pid {
		t.Fatalf("home processes %v after the restart, want the adopted %d alone", pids, pid)
	}
	code, raw := g.adminDo(t, http.MethodGet, "/admin/homes/"+fiHome)
	var h struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(raw), &h); code != http.StatusOK || err != nil || h.Status != "running" {
		t.Fatalf("home after the first request: %d %s", code, raw)
	}
	if !strings.Contains(g.Output(), "did not stop cleanly") {
		t.Fatalf("the restart did not say the last gateway stopped uncleanly:\n%s", g.Output())
	}
}

// A suspend that arrives while the home wakes is refused with 409 and the
// reason, never answered 200 for nothing; the wake goes on.
func TestSuspendDuringWakeIsRefused(t *testing.T) {
	g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{boot: "2s", admin: true}))
	done := make(chan int, 1)
	go func() {
		c := &http.Client{Timeout: 30 * time.Second}
		res, _, err := g.get(c, fiWhoami)
		if err != nil {
			done <- 0
			return
		}
		done <- res.StatusCode
	}()
	testbin.Eventually(t, "the home process to start", func() bool { return len(g.homePIDs(t, fiHome)) == 1 })
	code, body := g.adminDo(t, http.MethodPost, "/admin/homes/"+fiHome+"/suspend")
	if code != http.StatusConflict || !strings.Contains(body, "wake of the home is in progress") {
		t.Fatalf("suspend during a wake: %d %s, want 409 with the reason", code, body)
	}
	if got := <-done; got != http.StatusOK {
		t.Fatalf("the request that woke the home: %d", got)
	}
}
