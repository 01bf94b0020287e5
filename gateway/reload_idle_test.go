package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
)

// TestReloadShortensIdleTick: a reload that shortens a home's idle
// timeout below the idle loop's period shortens the period too, and the
// awake home is suspended on its new timeout.
func TestReloadShortensIdleTick(t *testing.T) {
	t.Parallel()
	rd := rdStart(t, `
wake:
  idle_timeout: 1h
homes:
  - id: nap
`)
	c := e2eClient(t)
	if code, body := rd.get(t, c, "/node/nap/whoami", nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	eng := rd.g.Engine()
	testbin.Eventually(t, "the idle loop to run", func() bool { return eng.IdleTick() == time.Second })
	rd.reload(t, `
wake:
  idle_timeout: 1h
homes:
  - id: nap
    idle_timeout: 200ms
`)
	if got := eng.IdleTick(); got != 50*time.Millisecond {
		t.Fatalf("idle period after the reload: %s, want 50ms (a quarter of the new 200ms timeout)", got)
	}
	testbin.Eventually(t, "the home suspended on its new idle timeout", func() bool {
		hs, err := eng.HomeState(context.Background(), "nap")
		return err == nil && hs.Status == registry.StatusSuspended
	})
}
