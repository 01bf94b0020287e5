package wake_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// registerSleepers registers n more homes of the rig's provider that are
// never woken, each with its own relay token.
func (r *rig) registerSleepers(n int) {
	r.t.Helper()
	for i := range n {
		id := fmt.Sprintf("s%05d", i)
		if err := r.eng.Register(context.Background(), homes.Spec{ID: id, Target: "t-" + id, Provider: "exec",
			Version: "1", RelayToken: "token-" + id, IdleTimeout: time.Hour}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// TestIdleLoopVisitsOnlyAwakeHomes proves that a round of the idle loop
// costs the homes that run, not the homes registered: with 500 sleeping
// homes and one awake, the loop looks at one home per round (counted by
// the engine, no timing involved). A loop that walked every home would
// count 501 per round.
func TestIdleLoopVisitsOnlyAwakeHomes(t *testing.T) {
	r := newRig(t, rigOptions{tick: 5 * time.Millisecond, idle: time.Hour})
	r.registerSleepers(500)
	r.ensure()
	testbin.Eventually(t, "the awake home in the awake set", func() bool { return r.eng.Stats().Awake == 1 })
	before := r.eng.Stats()
	r.waitTicks(20)
	after := r.eng.Stats()
	if after.Homes != 501 {
		t.Fatalf("homes = %d, want 501", after.Homes)
	}
	ticks := after.IdleTicks - before.IdleTicks
	visits := after.IdleVisits - before.IdleVisits
	// One round may be under way on either side of the window.
	if visits > ticks+2 || visits < ticks-2 {
		t.Fatalf("the idle loop looked at %d homes in %d rounds with one home awake; want one a round", visits, ticks)
	}
}

// TestAwakeSetFollowsStatus proves that a home leaves the awake set when
// it is suspended, and that removing a home forgets it.
func TestAwakeSetFollowsStatus(t *testing.T) {
	r := newRig(t, rigOptions{tick: 5 * time.Millisecond, idle: 50 * time.Millisecond})
	r.registerSleepers(3)
	r.ensure()
	r.waitEvents(1, events.Suspend)
	testbin.Eventually(t, "the suspended home out of the awake set", func() bool { return r.eng.Stats().Awake == 0 })
	if st := r.record().Status; st != registry.StatusSuspended {
		t.Fatalf("status = %s, want suspended", st)
	}
	r.eng.Unregister("s00001")
	if got := r.eng.Stats().Homes; got != 3 {
		t.Fatalf("homes after one removal = %d, want 3", got)
	}
	if r.eng.Known("s00001") {
		t.Fatal("a removed home is still known")
	}
}

// TestHomeForTokenAmongMany proves that the relay token lookup finds the
// one home of a token among many, follows a replaced token, and finds
// nothing for an unknown or removed one.
func TestHomeForTokenAmongMany(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.registerSleepers(200)
	for _, tc := range []struct {
		token, want string
	}{
		{"token-s00000", "s00000"},
		{"token-s00199", "s00199"},
		{rigToken, rigHome},
		{"token-s00200", ""},
		{"", ""},
	} {
		got, ok := r.eng.HomeForToken(tc.token)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("HomeForToken(%q) = %q, %v; want %q", tc.token, got, ok, tc.want)
		}
	}
	// Registered again with another token: the old one names nothing.
	if err := r.eng.Register(context.Background(), homes.Spec{ID: "s00007", Target: "t-s00007", Provider: "exec",
		Version: "1", RelayToken: "fresh"}); err != nil {
		t.Fatal(err)
	}
	if id, ok := r.eng.HomeForToken("token-s00007"); ok {
		t.Errorf("the replaced token still names %s", id)
	}
	if id, _ := r.eng.HomeForToken("fresh"); id != "s00007" {
		t.Errorf("the new token names %q, want s00007", id)
	}
	r.eng.Unregister("s00007")
	if id, ok := r.eng.HomeForToken("fresh"); ok {
		t.Errorf("the token of a removed home names %s", id)
	}
}
