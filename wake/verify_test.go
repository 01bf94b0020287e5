package wake_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/wake"
)

// TestExpiredVerdictIsNoColdWake wakes a home, lets its warm verdict
// expire, and sends another request: the home ran all along, so the wake
// that proves it ready again is a "verify", not a cold wake, in the
// history, the caller's wait (Server-Timing) and the record's last wake.
func TestExpiredVerdictIsNoColdWake(t *testing.T) {
	r := newRig(t, rigOptions{warmTTL: 50 * time.Millisecond})
	if a := r.ensure(); a.Waited <= 0 {
		t.Fatalf("the first wake waited %v; want a cold wake's wait", a.Waited)
	}
	first := r.record()
	pids := testbin.HomePIDs(t, r.homeDir())
	r.waitCold()
	if a := r.ensure(); a.Waited != 0 {
		t.Errorf("a request on a running home with an expired verdict waited %v for a wake; want none shown", a.Waited)
	}
	if got := testbin.HomePIDs(t, r.homeDir()); len(got) != 1 || got[0] != pids[0] {
		t.Fatalf("home processes %v, want still %v: nothing was to be started", got, pids)
	}
	h := r.eng.WakeHistory(rigHome)
	if len(h) != 2 || h[0].Cause != wake.CauseVerify || h[1].Cause != "cold" {
		t.Fatalf("wakes %+v; want a cold wake, then a verify", h)
	}
	if rec := r.record(); !rec.LastWakeAt.Equal(first.LastWakeAt) || rec.LastWakeLatency != first.LastWakeLatency {
		t.Errorf("the record's last wake moved to %v (%v) from %v (%v): a verify is no wake",
			rec.LastWakeAt, rec.LastWakeLatency, first.LastWakeAt, first.LastWakeLatency)
	}
}

// TestStoppedHomeResumedLoudly stops a running home's process with SIGSTOP
// (not the gateway's doing): the next wake resumes it, says so in the log,
// and counts as a wake, not a verify.
func TestStoppedHomeResumedLoudly(t *testing.T) {
	r := newRig(t, rigOptions{warmTTL: 50 * time.Millisecond})
	r.ensure()
	pids := testbin.HomePIDs(t, r.homeDir())
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the home stopped", func() bool { return testbin.ProcState(pids[0]) == 'T' })
	r.waitCold()
	r.ensure()
	if st := testbin.ProcState(pids[0]); st == 'T' {
		t.Fatal("the home is still stopped after a wake")
	}
	if !strings.Contains(r.logs.String(), "resumed it (SIGCONT)") {
		t.Errorf("no log line says the stopped home was resumed:\n%s", r.logs)
	}
	if h := r.eng.WakeHistory(rigHome); len(h) != 2 || h[0].Cause != "cold" {
		t.Errorf("wakes %+v; want the resume counted as a cold wake", h)
	}
}

// waitCold waits until the home's warm verdict has expired.
func (r *rig) waitCold() {
	r.t.Helper()
	testbin.Eventually(r.t, "the warm verdict to expire", func() bool {
		hs, err := r.eng.HomeState(context.Background(), rigHome)
		return err == nil && !hs.Warm
	})
}
