package fly_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/fly/flyfake"
	"github.com/wakegate/wakegate/registry"
)

// The engine tests of this file run the engine on the fake's habits that
// the real Machines API has and a kinder fake hid: each fails on a
// provider that does not handle the habit.

// countCalls counts the calls of action the fake received.
func countCalls(w world, action string) int {
	n := 0
	for _, c := range w.srv.Calls() {
		if c.Action == action {
			n++
		}
	}
	return n
}

// rollTo2 wakes the home on version 1, sets target 2 and suspends the
// home, so that the next wake rolls it lazily.
func rollTo2(t *testing.T, r *engineRig, w world) {
	t.Helper()
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.SetTarget(context.Background(), w.target("2", false)); err != nil {
		t.Fatal(err)
	}
	r.suspend()
}

// TestEngineLazyRollOfSleepingMachine: a roll runs at the wake of a
// sleeping home, so the machine is suspended or stopped when it is
// updated, and Fly leaves such a machine stopped after replacing. The
// provider starts it and the roll completes on version 2, well within the
// ready timeout.
func TestEngineLazyRollOfSleepingMachine(t *testing.T) {
	for _, rest := range []string{"suspended", "stopped"} {
		t.Run(rest, func(t *testing.T) {
			w := flyWorld(t)
			r := newEngineRig(t, w, rigTimes{ready: 3 * time.Second})
			rollTo2(t, r, w)
			if rest == "stopped" {
				w.srv.SetState(machine, "stopped")
			}
			if got := w.state(); got != rest {
				t.Fatalf("machine %s before the roll, want %s", got, rest)
			}
			if v := r.version(); v != "2" {
				t.Fatalf("version %q after a lazy roll of a %s machine, want 2", v, rest)
			}
			if got := r.events("roll."); !equalIgnoring(got, []string{"roll.start:2", "roll.done:2"}) {
				t.Errorf("roll events %v", got)
			}
			if n := countCalls(w, "start"); n < 2 {
				t.Errorf("%d starts: the machine Fly left stopped after the update was never started", n)
			}
		})
	}
}

// TestEngineLeaseOutlivesSlowBoot: a roll holds the machine's lease across
// an update and a boot that lasts longer than the lease's TTL. The lease
// stays the roll's until the roll releases it: another client cannot take
// it meanwhile, and the release succeeds.
func TestEngineLeaseOutlivesSlowBoot(t *testing.T) {
	const ttl, boot = 2 * time.Second, 3 * time.Second
	w := flyWorldWith(t, flyfake.Options{Delays: flyfake.Delays{Start: boot}},
		func(c *fly.Config) { c.LeaseTTL = ttl })
	w.srv.Habits(machine, func(h *flyfake.Habits) { h.AfterUpdate = flyfake.UpdateStarted })
	r := newEngineRig(t, w, rigTimes{ready: 4 * boot})
	rollTo2(t, r, w)
	w.srv.Reset()
	got := make(chan string, 1)
	go func() {
		ep, err := r.request()
		if err != nil {
			got <- "wake: " + err.Error()
			return
		}
		got <- ep
	}()
	if !w.srv.AwaitCall("update", 1, awaitFor) || !w.srv.AwaitState(machine, "starting", awaitFor) {
		t.Fatal("the roll never updated and booted the machine")
	}
	// The lease's TTL is a clock on the API's side: only time passing
	// shows whether the holder kept it.
	time.Sleep(ttl + ttl/4)
	if w.srv.TryLease(machine, "deployer@example.test", time.Minute) {
		t.Error("another client took the machine's lease while the roll still held it (the lease lapsed)")
	}
	if res := <-got; strings.HasPrefix(res, "wake: ") {
		t.Fatalf("roll: %s", res)
	}
	released := false
	for _, c := range w.srv.Calls() {
		if c.Action == "release" && c.Status == http.StatusOK {
			released = true
		}
	}
	if !released {
		t.Errorf("the roll's lease was not released: calls %v", w.srv.Calls())
	}
}

// TestEngineStartAnsweredError: Fly answers a start 200 {"status":
// "error"} when it cannot start the machine. The wake fails at once with
// the API's message in the operator's cause, not at the ready timeout as
// a slow start.
func TestEngineStartAnsweredError(t *testing.T) {
	const msg = "no capacity for machine in region ams"
	w := flyWorld(t)
	w.srv.Habits(machine, func(h *flyfake.Habits) { h.StartError = msg })
	r := newEngineRig(t, w, rigTimes{ready: 3 * time.Second})
	_, err := r.request()
	fe, ok := fault.As(err)
	if !ok {
		t.Fatalf("request: %v, want a fault", err)
	}
	if fe.Code == homefault.CodeWakeTimeout {
		t.Fatalf("request failed at the ready timeout (%v): the failed start was read as a slow one", err)
	}
	if fe.Cause == nil || !strings.Contains(fe.Cause.Error(), msg) || !strings.Contains(fe.Cause.Error(), fly.CodeStartFailed) {
		t.Errorf("cause %v, want %s and the API's message", fe.Cause, fly.CodeStartFailed)
	}
	if n := countCalls(w, "start"); n != 1 {
		t.Errorf("%d starts, want 1", n)
	}
}

// TestEngineSuspendRefused: Fly names what suspend needs (at most 2 GB,
// no swap, no schedule) but not how it refuses. Whatever the status of the
// refusal, an idle home is stopped instead, and the next idle period stops
// it without asking for a suspend again.
func TestEngineSuspendRefused(t *testing.T) {
	for _, status := range []int{http.StatusPreconditionFailed, http.StatusBadRequest, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			w := flyWorld(t)
			w.srv.Habits(machine, func(h *flyfake.Habits) { h.SuspendRefusal = status })
			r := newEngineRig(t, w, rigTimes{idle: 200 * time.Millisecond, tick: 50 * time.Millisecond})
			first := 0
			for round := 1; round <= 2; round++ {
				if _, err := r.request(); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !w.srv.AwaitState(machine, "stopped", awaitFor) {
					t.Fatalf("round %d: the idle home's machine is %s, want stopped after the refused suspend", round, w.state())
				}
				testbin.Eventually(t, "the record follows", func() bool {
					return r.record().Status == registry.StatusSuspended
				})
				if round == 1 {
					first = countCalls(w, "suspend")
				}
			}
			if first == 0 {
				t.Fatal("no suspend was asked for")
			}
			if n := countCalls(w, "suspend"); n != first {
				t.Errorf("%d suspend calls in the second idle period, want none (the refusal remembered)", n-first)
			}
		})
	}
}

// TestEngineWaitFailsToReachState: a boot fails and Fly's wait answers
// "machine failed to reach desired state". With the default restart
// policy Fly boots the machine again and the wake waits for it; with
// restart policy "no" nothing will, and the wake fails at once, saying so.
func TestEngineWaitFailsToReachState(t *testing.T) {
	t.Run("restarted", func(t *testing.T) {
		w := flyWorld(t)
		w.srv.Habits(machine, func(h *flyfake.Habits) { h.CrashBoots = 1 })
		r := newEngineRig(t, w, rigTimes{ready: 5 * time.Second})
		if v := r.version(); v != "1" {
			t.Fatalf("version %q", v)
		}
	})
	t.Run("restart policy no", func(t *testing.T) {
		w := flyWorld(t)
		w.srv.AddMachine(machine, flyfake.MachineSpec{State: "stopped", Image: "registry.fly.io/homes:1",
			Metadata: map[string]string{"wakegate_version": "1"}, Config: map[string]any{"restart": map[string]any{"policy": "no"}}})
		w.srv.Habits(machine, func(h *flyfake.Habits) { h.CrashBoots = 1 })
		r := newEngineRig(t, w, rigTimes{ready: 3 * time.Second})
		_, err := r.request()
		fe, ok := fault.As(err)
		if !ok || fe.Code == homefault.CodeWakeTimeout {
			t.Fatalf("request: %v, want a failure before the ready timeout", err)
		}
		if fe.Cause == nil || !strings.Contains(fe.Cause.Error(), fly.CodeStartFailed) || !strings.Contains(fe.Cause.Error(), "restart policy") {
			t.Errorf("cause %v, want %s naming the restart policy", fe.Cause, fly.CodeStartFailed)
		}
	})
}

// TestEngineWakeDuringAnotherDeploy: the machine read by a wake is
// replaced by someone else's update right after the read, so the instance
// the wake waits for is replaced. The wake reads the machine again and
// waits for the new instance.
func TestEngineWakeDuringAnotherDeploy(t *testing.T) {
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{ready: 5 * time.Second})
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	r.suspend()
	w.srv.SetState(machine, "starting") // a start from elsewhere, under way
	w.srv.Habits(machine, func(h *flyfake.Habits) { h.ReplaceAfterGet = 1 })
	if v := r.version(); v != "1" {
		t.Fatalf("version %q", v)
	}
}

// TestEngineLeaseCreateAnswerLost: the API creates the roll's lease but
// its 201 is lost (a 502 on the way back). The provider must not ask again
// blindly, meet its own lease and wait out the TTL: it finds that the
// lease is its own and goes on.
func TestEngineLeaseCreateAnswerLost(t *testing.T) {
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{ready: 5 * time.Second})
	rollTo2(t, r, w)
	w.srv.Fail("lease", 1, http.StatusBadGateway, true)
	if v := r.version(); v != "2" {
		t.Fatalf("version %q, want the roll to 2 done", v)
	}
	if m, _ := w.srv.Machine(machine); m.LeaseOwner != "" {
		t.Errorf("lease of %s left behind", m.LeaseOwner)
	}
}

// TestEngineStartFromSuspending: someone else (Fly's proxy, an operator)
// is suspending the machine, which takes seconds on Fly, when a request
// comes. Fly starts a suspending machine straight away; the wake does not
// wait for the suspend to finish first.
func TestEngineStartFromSuspending(t *testing.T) {
	w := flyWorld(t)
	r := newEngineRig(t, w, rigTimes{ready: 3 * time.Second})
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	w.srv.Wedge(machine, true) // a suspend that outlasts the ready timeout
	w.srv.SetState(machine, "suspending")
	if res := r.refresh(home); res.After != registry.StatusSuspended {
		t.Fatalf("refresh: %+v", res)
	}
	if v := r.version(); v != "1" {
		t.Fatalf("version %q", v)
	}
}

// TestEngineAtFlyTimings runs a home's life at a quarter of Fly's own
// timings (a cold start 500ms, a resume 75ms, a suspend over a second): a
// cold wake, an idle suspend, a resume, and a lazy roll that updates the
// suspended machine, starts it cold and proves version 2. The order of
// events is Fly's; the times are logged, never asserted.
func TestEngineAtFlyTimings(t *testing.T) {
	w := flyWorldWith(t, flyfake.Options{Scale: 0.25}, nil)
	r := newEngineRig(t, w, rigTimes{ready: 10 * time.Second})
	at := time.Now()
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	cold := time.Since(at)
	r.suspend()
	if got := w.state(); got != "suspended" {
		t.Fatalf("machine %s after the suspend", got)
	}
	at = time.Now()
	if _, err := r.request(); err != nil {
		t.Fatal(err)
	}
	resume := time.Since(at)
	if _, err := r.eng.SetTarget(context.Background(), w.target("2", false)); err != nil {
		t.Fatal(err)
	}
	r.suspend()
	at = time.Now()
	if v := r.version(); v != "2" {
		t.Fatalf("version %q after the lazy roll", v)
	}
	t.Logf("cold wake %s, resume %s, lazy roll of a suspended machine %s", cold, resume, time.Since(at))
}
