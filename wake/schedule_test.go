package wake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/schedule"
	"github.com/wakegate/wakegate/wake"
)

// TestClockScheduleKeepsAwakeAndWakesAtStart: a home with keep-awake
// windows 00:00-00:05 and 00:20-00:25 (UTC; a bubble starts at midnight)
// and an idle timeout of 40s, checked every 10s, is not suspended inside
// the first window although it has been idle since its start; the tick at
// the window's end suspends it; the tick at the next window's start wakes
// it, with the cause schedule, and keeps it awake through that window.
func TestClockScheduleKeepsAwakeAndWakesAtStart(t *testing.T) {
	addr, _ := lcListener(t)
	synctest.Test(t, func(t *testing.T) {
		var ws []schedule.Window
		for _, s := range []string{"00:00-00:05", "00:20-00:25"} {
			w, err := schedule.ParseWindow(s)
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		sch, err := schedule.New("UTC", ws)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if start.UTC().Hour() != 0 || start.UTC().Minute() != 0 {
			t.Fatalf("the bubble starts at %s, want midnight UTC", start.UTC())
		}
		e, p, sess := clockEngine(t, addr, homes.Spec{IdleTimeout: 40 * time.Second, Schedule: sch}, nil)
		sess.End(sess.Begin("h1"))
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		runIdleLoop(t, e, 10*time.Second)
		at := func(d time.Duration, want registry.Status, wakes int64) {
			t.Helper()
			time.Sleep(time.Until(start.Add(d)))
			synctest.Wait()
			hs, err := e.HomeState(context.WithoutCancel(t.Context()), "h1")
			if err != nil {
				t.Fatal(err)
			}
			if hs.Status != want || p.wakes.Load() != wakes {
				t.Fatalf("at %s: status %s after %d provider wakes; want %s after %d", d, hs.Status, p.wakes.Load(), want, wakes)
			}
		}
		at(5*time.Minute-time.Nanosecond, registry.StatusRunning, 1) // idle for 5m, inside the window
		at(5*time.Minute, registry.StatusSuspended, 1)               // the window ended
		at(20*time.Minute-time.Nanosecond, registry.StatusSuspended, 1)
		at(20*time.Minute, registry.StatusRunning, 2) // woken at the window's start
		if h := e.WakeHistory("h1"); len(h) == 0 || h[0].Cause != wake.CauseSchedule {
			t.Fatalf("wake history %+v; want the last wake's cause %q", h, wake.CauseSchedule)
		}
		at(25*time.Minute-time.Nanosecond, registry.StatusRunning, 2) // idle, inside the window
		at(25*time.Minute, registry.StatusSuspended, 2)
	})
}
