package httpprov

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/wake"
)

// noSessions is a session table with nobody in it.
type noSessions struct{}

func (noSessions) Count(string) int           { return 0 }
func (noSessions) IdleSince(string) time.Time { return time.Time{} }
func (noSessions) Touch(string)               {}
func (noSessions) Snapshot() map[string]int   { return nil }

// TestRefreshNormalisesControlPlaneStates: a control plane that reports a
// running home paused, standby or hibernated (its own words) has a
// refresh record the home suspended and drop its verdict; one that
// reports a sleeping home running has it recorded running, with no
// verdict until a request proves it.
func TestRefreshNormalisesControlPlaneStates(t *testing.T) {
	for _, tc := range []struct {
		state string
		wake  bool // the home is woken (running, warm) before the state changes
		want  provider.State
		after registry.Status
	}{
		{"paused", true, provider.StateSuspended, registry.StatusSuspended},
		{"standby", true, provider.StateSuspended, registry.StatusSuspended},
		{"hibernated", true, provider.StateSuspended, registry.StatusSuspended},
		{"running", false, provider.StateRunning, registry.StatusRunning},
	} {
		t.Run(tc.state, func(t *testing.T) {
			cp := newControlPlane(t)
			store, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			eng := wake.New(wake.Options{
				Store: store, Providers: map[string]provider.Provider{"http": newClient(t, cp.base, nil)}, Sessions: noSessions{},
				Instance: "test", WarmTTL: time.Hour, ReadyTimeout: 10 * time.Second, RetryAfter: time.Second,
				MaxConcurrent: 2, FailureBackoff: time.Second, Probe: probe.Spec{Kind: probe.HTTP, Path: "/"},
				Log: slog.New(slog.DiscardHandler),
			})
			t.Cleanup(eng.Close)
			if err := eng.Register(context.Background(), homes.Spec{ID: alice.ID, Target: alice.Target, Provider: "http",
				Version: "1", Settings: provider.Settings{Options: alice.Options}}); err != nil {
				t.Fatal(err)
			}
			if tc.wake {
				if _, err := eng.EnsureAwake(ctxFor(t, 20*time.Second), alice.ID); err != nil {
					t.Fatal(err)
				}
			}
			cp.setState(alice.ID, tc.state)
			var res refresh.Result
			testbin.Eventually(t, "a refresh not refused as busy", func() bool {
				res, err = eng.Refresh(ctxFor(t, 20*time.Second), alice.ID)
				return !fault.Is(err, fault.Busy)
			})
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			if res.Provider != tc.want || res.After != tc.after || len(res.Changed) == 0 {
				t.Fatalf("refresh %+v, want provider %s and the record %s", res, tc.want, tc.after)
			}
			if eng.Warm(alice.ID) {
				t.Error("the verdict stands after the refresh")
			}
			rec, err := store.GetHome(context.Background(), alice.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != tc.after || rec.Verdict != registry.VerdictNone {
				t.Errorf("record %s/%q, want %s with no verdict", rec.Status, rec.Verdict, tc.after)
			}
		})
	}
}
