package wakerecord

import (
	"errors"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// TestObserve reads a home's state in the order a waiting page needs it:
// a fresh verdict, a wake in flight, a give-up, a failed last wake, a
// running home, and otherwise asleep.
func TestObserve(t *testing.T) {
	gave, failed := errors.New("given up"), errors.New("wake failed")
	for _, c := range []struct {
		name string
		s    State
		want string
		err  error
	}{
		{"warm beats all", State{Warm: true, Waking: true, GaveUp: gave}, Ready, nil},
		{"queued", State{Waking: true, Phase: Queued, Started: time.Now()}, Queued, nil},
		{"starting", State{Waking: true, Phase: Starting, Started: time.Now()}, Starting, nil},
		{"health pending", State{Waking: true, Phase: HealthPending, Started: time.Now()}, HealthPending, nil},
		{"other steps probe", State{Waking: true, Phase: "proven", Started: time.Now()}, Probing, nil},
		{"given up", State{GaveUp: gave, Ended: failed}, Failed, gave},
		{"last wake failed", State{Ended: failed, Took: time.Second}, Failed, failed},
		{"running", State{Status: registry.StatusRunning}, Ready, nil},
		{"asleep", State{Status: registry.StatusSuspended}, Asleep, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Observe(c.s)
			if v.Phase != c.want || !errors.Is(v.Err, c.err) {
				t.Fatalf("Observe = %+v, want phase %s err %v", v, c.want, c.err)
			}
		})
	}
}

// TestExpected is the median of the last five successful wakes.
func TestExpected(t *testing.T) {
	if d := Expected(nil); d != 0 {
		t.Fatalf("no wakes: %v, want 0", d)
	}
	wakes := []Record{{Outcome: "ready", TotalMS: 300}, {Outcome: "failed", TotalMS: 9000}, {Outcome: "ready", TotalMS: 100},
		{Outcome: "ready", TotalMS: 200}, {Outcome: "ready", TotalMS: 500}, {Outcome: "ready", TotalMS: 400},
		{Outcome: "ready", TotalMS: 9999}}
	if d := Expected(wakes); d != 300*time.Millisecond {
		t.Fatalf("Expected = %v, want 300ms", d)
	}
}
