package wake_test

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// TestIdleTickChanges: SetIdleTick changes the idle loop's period when no
// registered home needs a shorter one.
func TestIdleTickChanges(t *testing.T) {
	r := newRig(t, rigOptions{tick: time.Hour})
	testbin.Eventually(t, "the idle loop to run with its first period", func() bool { return r.eng.IdleTick() == time.Hour })
	r.eng.SetIdleTick(10 * time.Millisecond)
	if got := r.eng.IdleTick(); got != 10*time.Millisecond {
		t.Fatalf("IdleTick after SetIdleTick(10ms): %s", got)
	}
}

// TestIdleTickFollowsRegisteredHome: a home registered while the gateway
// runs (as the admin API does) with a short idle timeout shortens the idle
// loop's period at once. The loop starts with a period of an hour, so the
// new home, idle past its 50ms timeout, is suspended only because its
// registration shortened the period; a later, longer configured period
// does not undo it.
func TestIdleTickFollowsRegisteredHome(t *testing.T) {
	r := newRig(t, rigOptions{tick: time.Hour})
	ctx := context.Background()
	testbin.Eventually(t, "the idle loop to run with its first period", func() bool { return r.eng.IdleTick() == time.Hour })
	const id = "h2"
	if err := r.eng.Register(ctx, homes.Spec{ID: id, Target: "t2", Provider: "exec", Version: "1",
		RelayToken: rigToken, IdleTimeout: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got, want := r.eng.IdleTick(), 12500*time.Microsecond; got != want {
		t.Fatalf("IdleTick after registering a home idle after 50ms: %s, want %s", got, want)
	}
	r.eng.SetIdleTick(time.Minute)
	if got := r.eng.IdleTick(); got != 12500*time.Microsecond {
		t.Fatalf("IdleTick after SetIdleTick(1m): %s; the registered home still needs 12.5ms", got)
	}
	if _, err := r.eng.EnsureAwake(ctx, id); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the idle home suspended", func() bool {
		hs, err := r.eng.HomeState(ctx, id)
		return err == nil && hs.Status == registry.StatusSuspended
	})
}
