package registrytest

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// BackendOpener opens a fresh, empty Store for one test together with
// control of its backend: stop makes the backend stop answering (a server
// stopped, a file closed) and start, when not nil, brings it back with its
// data (nil for a backend that cannot come back, like a closed file).
type BackendOpener func(t *testing.T) (s registry.Store, stop, start func())

// unavailableBound bounds how long a call to a stopped backend may take
// before the suite gives up on it: the store's own timeouts must answer
// well inside it.
const unavailableBound = 30 * time.Second

// RunUnavailable runs the behaviour of a store whose backend stops: every
// call answers ErrUnavailable (not not-found, not a conflict), without
// hanging past its context; and, when the backend comes back, the store
// serves again without being opened anew, its data intact.
func RunUnavailable(t *testing.T, open BackendOpener) {
	s, stop, start := open(t)
	ctx := context.Background()
	h := mustCreateHome(t, s, SampleHome("h1"))
	stop()
	calls := []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"get home", func(ctx context.Context) error { _, err := s.GetHome(ctx, "h1"); return err }},
		{"list homes", func(ctx context.Context) error { _, err := s.ListHomes(ctx); return err }},
		{"put home", func(ctx context.Context) error { _, err := s.PutHome(ctx, h, registry.CondOf(h)); return err }},
		{"lock", func(ctx context.Context) error { _, err := s.Lock(ctx, "home/h1", "gw-a", time.Minute); return err }},
		{"report sessions", func(ctx context.Context) error {
			return s.ReportSessions(ctx, "gw-a", map[string]int{"h1": 1}, time.Minute)
		}},
		{"fleet sessions", func(ctx context.Context) error { _, err := s.FleetSessions(ctx, "h1"); return err }},
		{"get target", func(ctx context.Context) error { _, err := s.GetTarget(ctx); return err }},
	}
	for _, c := range calls {
		cctx, cancel := context.WithTimeout(ctx, unavailableBound)
		err := c.do(cctx)
		late := cctx.Err()
		cancel()
		if late != nil {
			t.Fatalf("%s on a stopped backend ran until its context ended (%v); the store's own timeouts must answer first", c.name, err)
		}
		WantErr(t, c.name+" on a stopped backend", err, registry.ErrUnavailable)
	}
	if start == nil {
		return
	}
	start()
	deadline := time.Now().Add(unavailableBound)
	for {
		got, err := s.GetHome(ctx, "h1")
		if err == nil {
			if d := SameHome(got, h); d != "" {
				t.Fatalf("home after the backend came back: %s", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not serve again after its backend came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	l := mustLock(t, s, "home/h1", "gw-a", time.Minute)
	if _, err := s.PutHome(ctx, h, registry.CondOf(h).Fenced(l)); err != nil {
		t.Fatalf("fenced write after the backend came back: %v", err)
	}
}
