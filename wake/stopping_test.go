package wake_test

import (
	"context"
	"testing"

	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// A gateway asked to quiesce a home another gateway stops first drops its
// warm verdict (its next request waits for the lock) and then answers with
// its live sessions, the one counted before the drop included.
func TestQuiesceHomeDropsVerdictThenCounts(t *testing.T) {
	addr, _ := lcListener(t)
	sessions := sessions.New()
	e := wake.New(lcOptions(t, lcStore(t), sessions, "http://"+addr))
	t.Cleanup(e.Close)
	if err := e.Register(context.Background(), homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.EnsureAwake(context.Background(), "h1"); err != nil {
		t.Fatal(err)
	}
	if !e.Warm("h1") {
		t.Fatal("no warm verdict after the wake")
	}
	c := sessions.Begin("h1") // a request in flight, counted before it looked at the verdict
	if n := e.QuiesceHome("h1").Sessions; n != 1 {
		t.Fatalf("quiesce answered %d sessions, want 1", n)
	}
	if e.Warm("h1") {
		t.Fatal("the warm verdict stood after quiesce: a new request would be forwarded to a stopping process")
	}
	if _, ok := e.WarmAwake("h1"); ok {
		t.Fatal("the warm path answered after quiesce")
	}
	sessions.End(c)
	if n := e.QuiesceHome("h1").Sessions; n != 0 {
		t.Fatalf("quiesce answered %d sessions once the request ended, want 0", n)
	}
	if n := e.QuiesceHome("nope").Sessions; n != 0 {
		t.Fatalf("quiesce of an unknown home answered %d", n)
	}
	// One gateway alone runs the same suspend: it marks and stops.
	if err := e.Suspend(context.Background(), "h1"); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	st, err := e.HomeState(context.Background(), "h1")
	if err != nil || st.Status != registry.StatusSuspended {
		t.Fatalf("after the suspend: %+v %v, want suspended", st, err)
	}
}
