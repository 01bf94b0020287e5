package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestIdleSuspendOfSlowHomeDelaysOnlyItself runs two real exec homes that
// fall idle one after the other. The first (h1) leaves a process that
// ignores SIGTERM, so its stop lasts the provider's whole stop grace (2s)
// before SIGKILL ends it. The second (h2) falls idle while that stop runs:
// its suspend must not wait for it, so h2 is suspended first. An idle
// loop that suspended homes one after another would suspend h2 only once
// h1's stop was over.
func TestIdleSuspendOfSlowHomeDelaysOnlyItself(t *testing.T) {
	const idleFast = 300 * time.Millisecond
	script := `if [ "$WAKEGATE_HOME" = h1 ]; then trap '' TERM; sleep 30 & fi
exec "$0" demo-home --addr "127.0.0.1:$WAKEGATE_PORT" --target "$WAKEGATE_TARGET" --version "$WAKEGATE_VERSION"`
	r := newRig(t, rigOptions{command: []string{"/bin/sh", "-c", script, testbin.Build(t)},
		tick: 20 * time.Millisecond, idle: 100 * time.Millisecond})
	if err := r.eng.Register(context.Background(), homes.Spec{ID: "h2", Target: "bob", Provider: "exec",
		Version: "1", RelayToken: "token-h2", IdleTimeout: idleFast}); err != nil {
		t.Fatal(err)
	}
	r.ensure()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.eng.EnsureAwake(ctx, "h2"); err != nil {
		t.Fatalf("EnsureAwake h2: %v", err)
	}
	woken := time.Now()
	evs := r.waitEvents(2, events.Suspend)
	at := map[string]time.Time{}
	took := map[string]float64{}
	for _, ev := range evs {
		at[ev.Home], took[ev.Home] = ev.Time, ev.TotalMS
	}
	t.Logf("h1 (slow) suspended after %.0fms; h2 suspended %s after it woke (idle timeout %s), %s after h1's stop began",
		took["h1"], at["h2"].Sub(woken).Round(time.Millisecond), idleFast,
		at["h2"].Sub(at["h1"].Add(-time.Duration(took["h1"]*float64(time.Millisecond)))).Round(time.Millisecond))
	h1Began := at["h1"].Add(-time.Duration(took["h1"] * float64(time.Millisecond)))
	if took["h1"] < 1500 || !h1Began.Before(at["h2"]) {
		t.Fatalf("h1's suspend took %.0fms and ended at %s, h2's at %s; the test needs h1's stop, lasting the stop grace, under way when h2 falls idle",
			took["h1"], at["h1"].Format(time.StampMilli), at["h2"].Format(time.StampMilli))
	}
	if evs[0].Home != "h2" {
		t.Fatalf("h2 suspended at %s, after h1's slow suspend ended at %s: one slow home delayed the other",
			at["h2"].Format(time.StampMilli), at["h1"].Format(time.StampMilli))
	}
}
