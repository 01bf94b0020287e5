package fly_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/registry"
)

// updatedImages are the images of the machine updates the fake API
// received, in order.
func updatedImages(t *testing.T, w world) []string {
	t.Helper()
	var out []string
	for _, c := range w.srv.Calls() {
		if c.Action != "update" {
			continue
		}
		var b struct {
			Config struct {
				Image string `json:"image"`
			} `json:"config"`
		}
		if err := json.Unmarshal([]byte(c.Body), &b); err != nil {
			t.Fatalf("update body %q: %v", c.Body, err)
		}
		out = append(out, b.Config.Image)
	}
	return out
}

// TestFlyReleaseSurvivesRestart: a home rolled onto version 2 of a
// target with an image of its own is still on version 2 when the gateway
// restarts. A roll onto a lying version 3 then fails, and the rollback
// recreates the machine with version 2's own image, stored with the home
// at the roll, not the image the config's template would make of "2".
func TestFlyReleaseSurvivesRestart(t *testing.T) {
	const own = "registry.fly.io/custom:2"
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{})
	if _, err := r.eng.SetTarget(context.Background(), registry.Target{Version: "2", Image: own}); err != nil {
		t.Fatal(err)
	}
	if v := r.version(); v != "2" {
		t.Fatalf("version %q after the roll to 2", v)
	}
	if m, _ := w.srv.Machine(machine); m.Image != own {
		t.Fatalf("machine image %q after the roll, want %q", m.Image, own)
	}
	r.eng.Close()
	r.start(rigTimes{})
	if _, err := r.eng.SetTarget(context.Background(), w.target("3", true)); err != nil {
		t.Fatal(err)
	}
	r.suspend()
	w.srv.Reset()
	if v := r.version(); v != "2" {
		t.Fatalf("version %q after a failed roll to 3 on the restarted engine, want 2 (rolled back)", v)
	}
	want := []string{"registry.fly.io/homes:3", own}
	if got := updatedImages(t, w); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("update images %v, want %v (the roll, then the rollback on version 2's own image)", got, want)
	}
	if m, _ := w.srv.Machine(machine); m.Image != own || m.Metadata["wakegate_version"] != "2" {
		t.Errorf("machine %+v after the rollback, want %s and version 2", m, own)
	}
}

// TestEngineRollWhileLeaseHeld: another client holds the machine's lease
// when a roll starts. Released while the roll waits for it, the roll goes
// ahead. Held past the roll's deadline, the roll fails, the rollback
// meets the same lease, and the caller, the event and the log get a roll
// incident that names the held lease; the machine is never updated under
// another's lease and stays on the prior version.
func TestEngineRollWhileLeaseHeld(t *testing.T) {
	t.Run("released during the wait", func(t *testing.T) {
		w := flyWorld(t)
		r := newEngineRig(t, w, rigTimes{})
		if _, err := r.request(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.SetTarget(context.Background(), w.target("2", false)); err != nil {
			t.Fatal(err)
		}
		r.suspend()
		w.srv.HoldLease(machine, "deployer@example.test", time.Minute)
		released := make(chan struct{})
		go func() {
			defer close(released)
			if w.srv.AwaitCall("lease", 2, 30*time.Second) { // two refusals seen
				w.srv.ReleaseLease(machine)
			}
		}()
		v := r.version()
		<-released
		if v != "2" {
			t.Fatalf("version %q, want the roll to 2 done once the lease was released", v)
		}
		if got := r.events("roll."); !equalIgnoring(got, []string{"roll.start:2", "roll.done:2"}) {
			t.Errorf("roll events %v", got)
		}
	})
	t.Run("held past the deadline", func(t *testing.T) {
		w := flyWorld(t)
		r := newEngineRig(t, w, rigTimes{ready: 2 * time.Second})
		if _, err := r.request(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.eng.SetTarget(context.Background(), w.target("2", false)); err != nil {
			t.Fatal(err)
		}
		r.suspend()
		w.srv.HoldLease(machine, "deployer@example.test", time.Hour)
		_, err := r.request()
		fe, ok := fault.As(err)
		if !ok || fe.Code != homefault.CodeRollIncident {
			t.Fatalf("request: %v, want %s", err, homefault.CodeRollIncident)
		}
		const holder = "deployer@example.test"
		if cause := fe.Cause.Error(); !strings.Contains(cause, holder) || !strings.Contains(cause, fly.CodeLeaseHeld) {
			t.Errorf("incident cause %q does not name the lease and its holder", cause)
		}
		if !strings.Contains(fe.Hint, "lease") {
			t.Errorf("incident hint %q does not say another client holds the lease", fe.Hint)
		}
		var incident []events.Event
		for _, ev := range r.bus.Recent() {
			if ev.Home == home && ev.Type == events.RollIncident {
				incident = append(incident, ev)
			}
		}
		if len(incident) != 1 || !strings.Contains(incident[0].Message, holder) {
			t.Errorf("roll.incident events %+v, want one naming %s", incident, holder)
		}
		for _, c := range w.srv.Calls() {
			if c.Action == "update" {
				t.Errorf("the machine was updated under another's lease: %+v", c)
			}
		}
		if m, _ := w.srv.Machine(machine); m.Image != "registry.fly.io/homes:1" || m.Metadata["wakegate_version"] != "1" {
			t.Errorf("machine %+v, want it left on version 1", m)
		}
		if rec := r.record(); rec.Version != "1" {
			t.Errorf("record version %q, want 1", rec.Version)
		}
		// Once the lease goes, the home wakes on version 1: version 2 is
		// marked bad and not tried again.
		w.srv.ReleaseLease(machine)
		testbin.Eventually(t, "a wake after the lease was released", func() bool {
			_, err := r.request()
			return err == nil
		})
		if v := r.version(); v != "1" {
			t.Errorf("version %q after the incident, want 1", v)
		}
	})
}
