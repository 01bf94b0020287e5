package execprov

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// An exec home answering /version with a redirect to an internal listener
// on loopback: the version check fails and the listener sees no request.
func TestExecVersionFollowsNoRedirect(t *testing.T) {
	internal, hits := testbin.InternalListener(t)
	e := newExec(t, testConfig(testDataDir(t)))
	s := provider.Spec{ID: "h1", Target: "alice", Version: "v1",
		Env: []string{"EXEC_TEST_VERSION_REDIRECT=" + internal.URL + "/anything"}}
	r := wake(t, e, s)
	waitReady(t, r.Endpoint) // the test's own client follows the redirect
	hits.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Ref = r.Ref
	v, err := e.Version(ctx, s)
	if err == nil {
		t.Errorf("a redirected version check answered %q; want an error", v)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal listener got %d requests through the home's redirect; want 0", n)
	}
}
