package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// TestIdleTickChanges: the idle loop takes a new period at once. It starts
// with a period of an hour, so the woken home, idle past its 50ms
// timeout, is suspended only because SetIdleTick shortened the period.
func TestIdleTickChanges(t *testing.T) {
	r := newRig(t, rigOptions{tick: time.Hour, idle: 50 * time.Millisecond})
	ctx := context.Background()
	if _, err := r.eng.EnsureAwake(ctx, rigHome); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the idle loop to run with its first period", func() bool { return r.eng.IdleTick() == time.Hour })
	r.eng.SetIdleTick(10 * time.Millisecond)
	if got := r.eng.IdleTick(); got != 10*time.Millisecond {
		t.Fatalf("IdleTick after SetIdleTick(10ms): %s", got)
	}
	testbin.Eventually(t, "the idle home suspended", func() bool {
		hs, err := r.eng.HomeState(ctx, rigHome)
		return err == nil && hs.Status == registry.StatusSuspended
	})
}
