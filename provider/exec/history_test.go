package execprov

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/provider"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestRuntimeHistoryKeepsLastRestarts crashes a home more than HistoryLimit
// times in a row and checks History keeps the last HistoryLimit restarts,
// oldest first, each naming the pid that exited, the one started and the
// exit reason, chained pid to pid up to the process that runs now.
func TestRuntimeHistoryKeepsLastRestarts(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	cfg.RestartBudget = 1000
	cfg.RestartPause = -1 // 23 restarts in a row: no pause between them
	e := newExec(t, cfg)
	s := provider.Spec{ID: "h1", Version: "v1"}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint)
	if h := e.History("h1"); h != nil {
		t.Fatalf("history before any exit: %+v", h)
	}

	crash := filepath.Join(dir, "homes", "h1", "crash")
	if err := os.WriteFile(crash, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exitHome(r.Endpoint, 3)
	for i := 0; i < HistoryLimit+3; i++ {
		if c := ch.next(t); c.State != provider.StateRunning {
			t.Fatalf("change %d: %+v, want a restart", i, c)
		}
	}
	if err := os.Remove(crash); err != nil {
		t.Fatal(err)
	}
	// Restarts started before the crash file went away still crash; wait
	// for one that serves.
	var last provider.Result
	testbin.Eventually(t, "a restarted home that serves", func() bool {
		st, err := e.Status(context.Background(), s)
		if err != nil || st.State != provider.StateRunning {
			return false
		}
		if _, err := get(st.Endpoint, "/version"); err != nil {
			return false
		}
		last = st
		return true
	})

	h := e.History("h1")
	if len(h) != HistoryLimit {
		t.Fatalf("history holds %d restarts, want %d", len(h), HistoryLimit)
	}
	for i, r := range h {
		if r.Outcome != provider.RestartDone || r.ExitReason != "exit status 3" || r.OldPID == 0 || r.NewPID == 0 || r.Time.IsZero() {
			t.Fatalf("entry %d: %+v", i, r)
		}
		if i > 0 && (r.OldPID != h[i-1].NewPID || r.Time.Before(h[i-1].Time)) {
			t.Fatalf("entry %d does not follow entry %d: %+v after %+v", i, i-1, r, h[i-1])
		}
	}
	if got := mustRef(t, last).PID; h[len(h)-1].NewPID != got {
		t.Fatalf("last restart started pid %d, the home runs pid %d", h[len(h)-1].NewPID, got)
	}
	// The accessor hands out a copy.
	h[0].OldPID = -1
	if e.History("h1")[0].OldPID == -1 {
		t.Fatal("History returned the provider's own slice")
	}
}

// TestRuntimeHistoryGaveUp checks the entry of a home the supervisor gives
// up on.
func TestRuntimeHistoryGaveUp(t *testing.T) {
	dir := testDataDir(t)
	ch := newChanges()
	cfg := testConfig(dir)
	cfg.OnChange = ch.onChange
	cfg.RestartBudget = 1
	e := newExec(t, cfg)
	r := wake(t, e, provider.Spec{ID: "h1", Version: "v1"})
	waitReady(t, r.Endpoint)
	first := mustRef(t, r).PID
	if err := os.WriteFile(filepath.Join(dir, "homes", "h1", "crash"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exitHome(r.Endpoint, 4)
	if c := ch.next(t); c.State != provider.StateRunning {
		t.Fatalf("first change %+v, want a restart", c)
	}
	if c := ch.next(t); c.State != provider.StateFailed {
		t.Fatalf("second change %+v, want failed", c)
	}
	h := e.History("h1")
	if len(h) != 2 {
		t.Fatalf("history %+v, want two entries", h)
	}
	if h[0].OldPID != first || h[0].ExitReason != "exit status 4" || h[0].Outcome != provider.RestartDone {
		t.Fatalf("first entry %+v", h[0])
	}
	if h[1].OldPID != h[0].NewPID || h[1].NewPID != 0 || h[1].ExitReason != "exit status 3" || h[1].Outcome != provider.RestartGaveUp {
		t.Fatalf("second entry %+v", h[1])
	}
	if e.History("nobody") != nil {
		t.Fatal("history of an unknown home")
	}
}
