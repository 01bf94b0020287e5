package wake_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// countingUpstream is an app upstream that answers status (200 until set)
// and remembers when each direct health check reached it; every request
// counts in hits.
type countingUpstream struct {
	srv    *httptest.Server
	status atomic.Int32
	hits   atomic.Int64
	mu     sync.Mutex
	checks []time.Time
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{}
	u.status.Store(http.StatusOK)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if r.UserAgent() == appstatus.HealthCheckUserAgent {
			u.mu.Lock()
			u.checks = append(u.checks, time.Now())
			u.mu.Unlock()
		}
		w.WriteHeader(int(u.status.Load()))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *countingUpstream) checkTimes() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.checks...)
}

// backoffApp is an app at up whose pause doubles from 10ms to 80ms.
func backoffApp(slug string, up *countingUpstream) registry.App {
	s := testApp(slug)
	s.Upstream = up.srv.URL
	s.Health.Interval = registry.Duration(10 * time.Millisecond)
	s.Health.MaxInterval = registry.Duration(80 * time.Millisecond)
	return s
}

// TestAppScheduleBacksOff: every ready observation in a row doubles the
// pause, up to max_interval; a failed one snaps it back to the interval; a
// forwarded request the app answered moves the next observation a pause
// after it, only while the app is ready. Each observation costs the app
// exactly its health check and its self-probe.
func TestAppScheduleBacksOff(t *testing.T) {
	up := newCountingUpstream(t)
	s := backoffApp("quiet", up)
	apps, _ := newAppsWithRoutes(t, nil, s)
	pulse := apps.Put(s) // a fresh app, and its pulse
	ctx := context.Background()
	ms := time.Millisecond
	for i, want := range []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms} {
		if st, _ := apps.RefreshSince(ctx, "quiet", time.Now()); st.Phase != appstatus.PhaseReady {
			t.Fatalf("observation %d: %+v", i+1, st)
		}
		sch, _ := apps.Schedule("quiet")
		if sch.Streak != i+1 || sch.Interval != want || !sch.Due.Equal(sch.LastObserved.Add(want)) ||
			sch.Observations != uint64(i+1) {
			t.Fatalf("after %d ready observations: %+v; want interval %s due a pause after the last", i+1, sch, want)
		}
	}
	if got := up.hits.Load(); got != 10 {
		t.Fatalf("the upstream got %d requests for 5 observations; want 10 (a health check and a self-probe each)", got)
	}

	// A passive observation a while after the last active one: the next
	// active one is due a pause after it.
	sch, _ := apps.Schedule("quiet")
	at := sch.LastObserved.Add(time.Hour)
	pulse.Beat(at)
	if sch, _ = apps.Schedule("quiet"); !sch.LastPassive.Equal(at) || !sch.Due.Equal(at.Add(80*ms)) {
		t.Fatalf("after a passive observation at %s: %+v; want due %s", at, sch, at.Add(80*ms))
	}

	up.status.Store(http.StatusInternalServerError)
	if st, _ := apps.RefreshSince(ctx, "quiet", time.Now()); st.Phase == appstatus.PhaseReady {
		t.Fatalf("observation of a failing app: %+v", st)
	}
	sch, _ = apps.Schedule("quiet")
	if sch.Streak != 0 || sch.Interval != 10*ms || !sch.Due.Equal(sch.LastObserved.Add(10*ms)) {
		t.Fatalf("after a failed observation: %+v; want the 10ms interval from the last active observation", sch)
	}
}

// TestAppScheduleLoop runs the gateway's observation loop (observe, then
// AwaitObservation) against an app that always passes, and checks from
// the upstream's side that the pause between two health checks is never
// shorter than the schedule said: 10, 20, 40, 80, 80ms.
func TestAppScheduleLoop(t *testing.T) {
	up := newCountingUpstream(t)
	s := backoffApp("loop", up)
	apps, _ := newApps(t, nil, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, _ = apps.Refresh(ctx, "loop", "")
			if !apps.AwaitObservation(ctx, "loop") {
				return
			}
		}
	}()
	testbin.Eventually(t, "six ready observations in a row", func() bool {
		sch, _ := apps.Schedule("loop")
		return sch.Streak >= 6
	})
	cancel()
	<-done
	checks := up.checkTimes()
	ms := time.Millisecond
	pauses := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms}
	if len(checks) < len(pauses)+1 {
		t.Fatalf("%d health checks; want at least %d", len(checks), len(pauses)+1)
	}
	for i, p := range pauses {
		if gap := checks[i+1].Sub(checks[i]); gap < p {
			t.Errorf("health checks %d and %d were %s apart; the schedule said at least %s", i+1, i+2, gap, p)
		}
	}
}

// TestAppScheduleHomeChangeKicks: an event of the app's home (here a
// suspend) snaps the pause back and has the loop observe at once: the
// suspended home's app leaves ready on the next observation, not a
// backed-off pause later.
func TestAppScheduleHomeChangeKicks(t *testing.T) {
	r := newRig(t, rigOptions{})
	s := testApp("kick")
	s.Home, s.Path = rigHome, "/apps/demo"
	s.Health.MaxInterval = registry.Duration(time.Hour)
	s.Health.Interval = registry.Duration(time.Hour) // only kicks observe again
	apps, bus := newApps(t, r.eng, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := apps.Start(ctx, "kick", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for apps.AwaitObservation(ctx, "kick") {
			_, _ = apps.Refresh(ctx, "kick", "")
		}
	}()
	defer func() { cancel(); <-done }()
	if err := r.eng.Suspend(ctx, rigHome); err != nil {
		t.Fatal(err)
	}
	bus.Publish(events.Event{Type: events.Suspend, Home: rigHome})
	testbin.Eventually(t, "the app observed with its home asleep", func() bool {
		st, _ := apps.Status("kick")
		return st.Reason == appstatus.ReasonHomeSleeping
	})
	if sch, _ := apps.Schedule("kick"); sch.Streak != 0 {
		t.Fatalf("after the home's suspend: %+v; want the streak reset", sch)
	}
}
