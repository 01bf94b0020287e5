package wake_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	execprov "github.com/wakegate/wakegate/provider/exec"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// refresh refreshes the rig's home and fails the test on error.
func (r *rig) refresh() refresh.Result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res refresh.Result
	var err error
	// The lock of the wake that just answered may still be held.
	testbin.Eventually(r.t, "a refresh not refused as busy", func() bool {
		res, err = r.eng.Refresh(ctx, rigHome)
		return !fault.Is(err, fault.Busy)
	})
	if err != nil {
		r.t.Fatalf("Refresh: %v", err)
	}
	return res
}

// TestRefreshSuspendedOutOfBand: the home's process is stopped (SIGSTOP)
// by someone else while its record says running and its verdict stands.
// A refresh reads the provider's state, records the home suspended, drops
// the verdict and says so in an event; the next request wakes the home
// again (the same process, resumed) and proves it.
func TestRefreshSuspendedOutOfBand(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.ensure()
	pids := testbin.HomePIDs(t, r.homeDir())
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	if err := syscall.Kill(-pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the home's process stopped", func() bool { return testbin.ProcState(pids[0]) == 'T' })

	res := r.refresh()
	if res.Before != registry.StatusRunning || res.Provider != provider.StateSuspended || res.After != registry.StatusSuspended ||
		!slices.Contains(res.Changed, refresh.ChangedVerdict) || !slices.Contains(res.Changed, refresh.ChangedStatus) {
		t.Fatalf("refresh %+v, want running -> suspended with the verdict dropped", res)
	}
	if r.eng.Warm(rigHome) {
		t.Error("the verdict of a suspended home still stands")
	}
	if rec := r.record(); rec.Status != registry.StatusSuspended || rec.Verdict != registry.VerdictNone {
		t.Errorf("record %s/%s, want suspended with no verdict", rec.Status, rec.Verdict)
	}
	if ev := r.waitEvents(1, refresh.Event); ev[0].Reason != string(provider.StateSuspended) || ev[0].Cause != "admin" {
		t.Errorf("refresh event %+v", ev[0])
	}
	if again := r.refresh(); len(again.Changed) != 0 {
		t.Errorf("a second refresh changed %v; the record already agreed", again.Changed)
	}

	a := r.ensure()
	if code, _, err := get(a.Endpoint.String(), rigProbePath+"/"); err != nil || code != 200 {
		t.Fatalf("the woken home: %d %v", code, err)
	}
	if got := testbin.HomePIDs(t, r.homeDir()); !slices.Equal(got, pids) || testbin.ProcState(pids[0]) == 'T' {
		t.Errorf("home processes %v (state %c), want %v resumed", got, testbin.ProcState(pids[0]), pids)
	}
	if rec := r.record(); rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy {
		t.Errorf("record after the wake %s/%s, want running/healthy", rec.Status, rec.Verdict)
	}
}

// noticeRig is a wake engine on the exec provider whose change notices
// never reach the engine (as when their record write fails): only a
// refresh can tell the engine what became of the home.
type noticeRig struct {
	t     *testing.T
	dir   string
	store *bolt.Store
	eng   *wake.Engine
}

func newNoticeRig(t *testing.T, budget int) *noticeRig {
	data := t.TempDir()
	r := &noticeRig{t: t, dir: filepath.Join(data, "homes", rigHome)}
	var err error
	if r.store, err = bolt.Open(filepath.Join(data, "state.db"), bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.store.Close() })
	logs := &testbin.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ex, err := execprov.New(execprov.Config{
		Command: []string{testbin.Build(t), "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
			"--version", "{version}"},
		DataDir: data, StopGrace: 2 * time.Second, RestartBudget: budget,
	}, log.With("provider", "exec"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ex.Close()
		testbin.KillHomes(data)
	})
	r.eng = wake.New(wake.Options{
		Store: r.store, Providers: map[string]provider.Provider{"exec": ex}, Sessions: sessions.New(),
		Instance: "test", WarmTTL: time.Minute, ReadyTimeout: 10 * time.Second, RetryAfter: time.Second,
		MaxConcurrent: 4, FailureBackoff: time.Second, RelayHeader: demohome.RelayHeader, Log: log,
	})
	t.Cleanup(r.eng.Close)
	if err := r.eng.Register(context.Background(), homes.Spec{ID: rigHome, Target: rigTarget, Provider: "exec",
		Version: "1", RelayToken: rigToken}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *noticeRig) ensure() homes.Awake {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := r.eng.EnsureAwake(ctx, rigHome)
	if err != nil {
		r.t.Fatalf("EnsureAwake: %v", err)
	}
	return a
}

// TestRefreshKilledOutOfBand: the home's process is killed (SIGKILL) and
// the engine never hears of it. With no restart budget the provider gives
// up on the home: a refresh records it failed with the provider's reason
// and drops the verdict, and the next request wakes it again. With a
// budget the provider restarts it on a new port: a refresh records the new
// endpoint and drops the verdict that names the dead one.
func TestRefreshKilledOutOfBand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int // exec.restart_budget; -1: none
		state   provider.State
		after   registry.Status
		changed []string
	}{
		{"no restart budget: failed", -1, provider.StateFailed, registry.StatusFailed,
			[]string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{"restarted: a new endpoint", 3, provider.StateRunning, registry.StatusRunning,
			[]string{refresh.ChangedVerdict, refresh.ChangedEndpoint}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newNoticeRig(t, tc.budget)
			first := r.ensure().Endpoint.String()
			pids := testbin.HomePIDs(t, r.dir)
			if len(pids) != 1 {
				t.Fatalf("home processes %v, want one", pids)
			}
			if err := syscall.Kill(-pids[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var res refresh.Result
			testbin.Eventually(t, "a refresh that sees the kill", func() bool {
				var err error
				res, err = r.eng.Refresh(context.Background(), rigHome)
				if err != nil && !fault.Is(err, fault.Busy) {
					t.Fatalf("Refresh: %v", err)
				}
				return err == nil && len(res.Changed) > 0
			})
			if res.Provider != tc.state || res.After != tc.after || !slices.Equal(res.Changed, tc.changed) {
				t.Fatalf("refresh %+v, want provider %s, after %s, changed %v", res, tc.state, tc.after, tc.changed)
			}
			if r.eng.Warm(rigHome) {
				t.Error("the verdict still stands")
			}
			rec, err := r.store.GetHome(context.Background(), rigHome)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != tc.after || (tc.after == registry.StatusFailed && rec.Reason == "") {
				t.Errorf("record %s (%q), want %s with the provider's reason", rec.Status, rec.Reason, tc.after)
			}
			if tc.after == registry.StatusRunning && rec.Endpoint == first {
				t.Errorf("record endpoint %s is still the killed process's", rec.Endpoint)
			}
			a := r.ensure()
			if code, _, err := get(a.Endpoint.String(), rigProbePath+"/"); err != nil || code != 200 {
				t.Fatalf("the home after the refresh: %d %v", code, err)
			}
		})
	}
}

// TestRefreshRefusals: an unknown home is not found; a home whose wake is
// in flight is busy (the wake records what it finds).
func TestRefreshRefusals(t *testing.T) {
	r := newRig(t, rigOptions{boot: 2 * time.Second})
	if _, err := r.eng.Refresh(context.Background(), "nope"); !fault.Is(err, fault.NotFound) {
		t.Errorf("refresh of an unknown home: %v, want not found", err)
	}
	if err := r.eng.StartNow(rigHome, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Refresh(context.Background(), rigHome); !fault.Is(err, fault.Busy) {
		t.Errorf("refresh during a wake: %v, want busy", err)
	}
}
