package wake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/wakerecord"
)

// A watcher that looks at a home's View only when Bus.Changed fires sees
// each phase of a wake, the probing phase included (phases are not events:
// the engine touches the bus when it moves), and the end.
func TestViewChangesWakeWatchers(t *testing.T) {
	r := newRig(t, rigOptions{boot: time.Second})
	var seen []string
	ch := r.bus.Changed(rigHome)
	v, _ := r.eng.View(rigHome)
	seen = append(seen, v.Phase)
	done := make(chan error, 1)
	go func() {
		_, err := r.eng.EnsureAwake(context.Background(), rigHome)
		done <- err
	}()
	deadline := time.After(30 * time.Second)
	for v.Phase != wakerecord.Ready && v.Phase != wakerecord.Failed {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no change announced after %v", seen)
		}
		ch = r.bus.Changed(rigHome)
		v, _ = r.eng.View(rigHome)
		if v.Phase != seen[len(seen)-1] {
			seen = append(seen, v.Phase)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen[0] != wakerecord.Asleep || seen[len(seen)-1] != wakerecord.Ready || !slices.Contains(seen, wakerecord.Probing) {
		t.Fatalf("phases seen by the watcher: %v, want asleep, …, probing, ready", seen)
	}
}
