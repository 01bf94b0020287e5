package wake_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// heldCallers makes n requests' wakes of the rig's home and checks that
// each gets home_failed and that none starts a wake or a process.
func heldCallers(t *testing.T, r *rig, n int) {
	t.Helper()
	starts := len(r.waitEvents(0, events.WakeStart))
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.eng.EnsureAwake(ctx, rigHome)
		cancel()
		if codeOf(err) != homefault.CodeHomeFailed {
			t.Fatalf("request %d after the give-up: %v, want home_failed at once", i+1, err)
		}
	}
	if _, _, ok := r.eng.Progress(rigHome); ok {
		t.Fatal("a request after the give-up started a wake")
	}
	if got := len(r.waitEvents(0, events.WakeStart)); got != starts {
		t.Fatalf("requests after the give-up started %d wakes", got-starts)
	}
	if pids := testbin.HomePIDs(t, r.homeDir()); len(pids) != 0 {
		t.Fatalf("requests after the give-up left processes %v", pids)
	}
}

// A home that crashes after it was ready, until the provider gives up on
// it (restart budget spent), stays given up on: the requests that follow
// get home_failed at once and start no process until the failure
// backoff's next attempt (ten minutes here) or an operator's start, which
// is a fresh attempt.
func TestEngineHoldsGiveUpUntilBackoff(t *testing.T) {
	r := newRig(t, rigOptions{boot: 20 * time.Millisecond, backoff: 10 * time.Minute})
	r.ensure()
	for n := 1; n <= 4; n++ {
		r.crash(n)
	}
	testbin.Eventually(t, "the home stored failed", func() bool { return r.record().Status == registry.StatusFailed })
	heldCallers(t, r, 5)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.eng.WakeNow(ctx, rigHome, "admin"); err != nil {
		t.Fatalf("an operator's start after the give-up: %v", err)
	}
}

// A home whose program does not exist is failed, with the reason, not
// suspended; requests then get home_failed at once instead of trying again
// (the next try is the backoff's or an operator's).
func TestEngineMissingProgramIsFailed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-program")
	r := newRig(t, rigOptions{backoff: 10 * time.Minute, command: []string{missing, "{port}"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.eng.EnsureAwake(ctx, rigHome); err == nil {
		t.Fatal("a home whose program is missing woke")
	}
	r.waitEvents(1, wakeEnds...)
	rec := r.record()
	if rec.Status != registry.StatusFailed || !strings.Contains(rec.Reason, "no-such-program") {
		t.Fatalf("stored %s (%q), want failed naming the program", rec.Status, rec.Reason)
	}
	heldCallers(t, r, 3)
}
