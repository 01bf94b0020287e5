package fly_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/registry"
)

// refresh refreshes the home, trying again while the lock of the operation
// that just answered is still held.
func (r *engineRig) refresh(id string) refresh.Result {
	r.t.Helper()
	var res refresh.Result
	var err error
	testbin.Eventually(r.t, "a refresh not refused as busy", func() bool {
		res, err = r.eng.Refresh(context.Background(), id)
		return !fault.Is(err, fault.Busy)
	})
	if err != nil {
		r.t.Fatalf("Refresh: %v", err)
	}
	return res
}

// actions are the actions of the calls the fake API received.
func actions(w world) []string {
	var out []string
	for _, c := range w.srv.Calls() {
		out = append(out, c.Action)
	}
	return out
}

// TestRefreshFollowsMachineState: the home's machine is put in a state by
// someone else (fly machine stop, Fly's autostop, a deploy) while the
// record says the opposite. A refresh reads the machine and makes the
// record agree, normalising the machine's state: starting, replacing and
// started are running, stopping and stopped stopped, suspending and
// suspended suspended, destroyed failed. A home found down loses its
// verdict; a home found running is recorded running with no verdict, and
// the next request proves it without starting the machine again.
func TestRefreshFollowsMachineState(t *testing.T) {
	for _, tc := range []struct {
		record   registry.Status // what the record says before: running or suspended
		machine  string          // the state the machine is put in
		provider provider.State
		after    registry.Status
		changed  []string
	}{
		{registry.StatusRunning, "suspended", provider.StateSuspended, registry.StatusSuspended, []string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{registry.StatusRunning, "suspending", provider.StateSuspended, registry.StatusSuspended, []string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{registry.StatusRunning, "stopped", provider.StateStopped, registry.StatusSuspended, []string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{registry.StatusRunning, "stopping", provider.StateStopped, registry.StatusSuspended, []string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{registry.StatusRunning, "destroyed", provider.StateFailed, registry.StatusFailed, []string{refresh.ChangedVerdict, refresh.ChangedStatus}},
		{registry.StatusRunning, "replacing", provider.StateRunning, registry.StatusRunning, nil},
		{registry.StatusSuspended, "started", provider.StateRunning, registry.StatusRunning, []string{refresh.ChangedStatus}},
		{registry.StatusSuspended, "starting", provider.StateRunning, registry.StatusRunning, []string{refresh.ChangedStatus}},
		{registry.StatusSuspended, "replacing", provider.StateRunning, registry.StatusRunning, []string{refresh.ChangedStatus}},
		{registry.StatusSuspended, "stopped", provider.StateStopped, registry.StatusSuspended, nil},
	} {
		t.Run(string(tc.record)+"/"+tc.machine, func(t *testing.T) {
			w := flyWorld(t)
			r := newEngineRig(t, w, rigTimes{})
			if _, err := r.request(); err != nil {
				t.Fatal(err)
			}
			if tc.record == registry.StatusSuspended {
				r.suspend()
			}
			w.srv.SetState(machine, tc.machine)
			res := r.refresh(home)
			if res.Before != tc.record || res.Provider != tc.provider || res.After != tc.after || !slices.Equal(res.Changed, tc.changed) {
				t.Fatalf("refresh %+v, want %s -> %s (provider %s), changed %v", res, tc.record, tc.after, tc.provider, tc.changed)
			}
			rec := r.record()
			if rec.Status != tc.after {
				t.Errorf("record %s, want %s", rec.Status, tc.after)
			}
			if (tc.after != registry.StatusRunning || len(tc.changed) > 0) && (r.eng.Warm(home) || rec.Verdict != registry.VerdictNone) {
				t.Errorf("verdict stands (warm %t, record %q) after a refresh that changed the home", r.eng.Warm(home), rec.Verdict)
			}
			if tc.after == registry.StatusFailed && !strings.Contains(rec.Reason, "destroyed") {
				t.Errorf("reason %q does not say the machine is destroyed", rec.Reason)
			}
			if len(tc.changed) > 0 {
				ev := r.events(refresh.Event)
				if len(ev) != 1 {
					t.Errorf("refresh events %v, want one", ev)
				}
			}
		})
	}
}

// TestRefreshThenRequest: after a refresh found the machine suspended out
// of band, the next request resumes it (a start call); after one found it
// started out of band, the next request proves it without a start.
func TestRefreshThenRequest(t *testing.T) {
	for _, tc := range []struct {
		name, machine string
		starts        int
	}{{"suspended out of band", "suspended", 1}, {"started out of band", "started", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			w := flyWorld(t)
			r := newEngineRig(t, w, rigTimes{})
			if _, err := r.request(); err != nil {
				t.Fatal(err)
			}
			if tc.machine == "started" {
				r.suspend()
			}
			w.srv.SetState(machine, tc.machine)
			if res := r.refresh(home); len(res.Changed) == 0 {
				t.Fatalf("refresh changed nothing: %+v", res)
			}
			w.srv.Reset()
			if v := r.version(); v != "1" {
				t.Fatalf("version %q after the refresh, want 1", v)
			}
			if n := strings.Count(strings.Join(actions(w), " "), "start"); n != tc.starts {
				t.Errorf("%d start calls for the request after the refresh (%v), want %d", n, actions(w), tc.starts)
			}
			if rec := r.record(); rec.Status != registry.StatusRunning || rec.Verdict != registry.VerdictHealthy {
				t.Errorf("record %s/%s, want running/healthy", rec.Status, rec.Verdict)
			}
		})
	}
}

// TestRefreshUnknownMachine: a provider that cannot say (the home's
// machine is not in the app) changes nothing; the result says unknown,
// why, and the likely fix.
func TestRefreshUnknownMachine(t *testing.T) {
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{})
	if err := r.eng.Register(context.Background(), homes.Spec{ID: "h2", Target: "bob", Provider: "p", Version: "1",
		Settings: provider.Settings{Options: []byte(`{"machine": "nope"}`)}}); err != nil {
		t.Fatal(err)
	}
	before, err := r.store.GetHome(context.Background(), "h2")
	if err != nil {
		t.Fatal(err)
	}
	res := r.refresh("h2")
	if res.Provider != provider.StateUnknown || len(res.Changed) != 0 || !strings.Contains(res.Reason, fly.CodeNotFound) ||
		!strings.Contains(res.Hint, "options.machine") {
		t.Fatalf("refresh %+v, want unknown with the reason and the hint, nothing changed", res)
	}
	after, err := r.store.GetHome(context.Background(), "h2")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation {
		t.Errorf("the record was written (generation %d -> %d)", before.Generation, after.Generation)
	}
}

// TestRefreshAtStart: the gateway stops with the home running; its
// machine is stopped while no gateway runs. The next start refreshes the
// home in the background instead of waking it: the record says suspended
// and the API saw no start. The next request wakes the home.
func TestRefreshAtStart(t *testing.T) {
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{})
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	r.eng.Close()
	w.srv.SetState(machine, "stopped")
	w.srv.Reset()
	r.start(rigTimes{})
	var ev events.Event
	testbin.Eventually(t, "the refresh at start", func() bool {
		for _, e := range r.bus.Recent() {
			if e.Type == refresh.Event && e.Home == home {
				ev = e
				return true
			}
		}
		return false
	})
	if ev.Cause != "adopt" || ev.Reason != string(provider.StateStopped) || ev.Phase != string(registry.StatusSuspended) {
		t.Errorf("refresh event %+v, want cause adopt, provider stopped, record suspended", ev)
	}
	if rec := r.record(); rec.Status != registry.StatusSuspended || rec.Verdict != registry.VerdictNone {
		t.Errorf("record %s/%s after the start, want suspended with no verdict", rec.Status, rec.Verdict)
	}
	if got := actions(w); !slices.Equal(got, []string{"get"}) {
		t.Errorf("calls at start %v, want one read of the machine", got)
	}
	if m, _ := w.srv.Machine(machine); m.State != "stopped" {
		t.Errorf("machine %s after the start, want it left stopped", m.State)
	}
	if v := r.version(); v != "1" {
		t.Fatalf("version %q after the start, want 1", v)
	}
}
