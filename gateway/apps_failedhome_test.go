package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/internal/testbin"
)

// An app whose last observation found its home failed is observed again
// by the next request, not answered from that observation: the home may
// have been woken since by another route (here /node/), or fixed and
// restarted. min_refresh is an hour and the periodic check never runs, so
// only the request's own observation can publish the route.
func TestAppOfAFailedHomeIsObservedAgainByARequest(t *testing.T) {
	dir, err := os.MkdirTemp("", "wakegate-mark-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the home's own user tests for the mark
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "ok")
	command := fmt.Sprintf(`["/bin/sh", "-c", "test -e %s || exit 3; exec \"$0\" demo-home --addr 127.0.0.1:{port} --target {target} --version {version}", %q]`,
		mark, testbin.Build(t))
	e2e := e2eStartWithCommand(t, command, `log:
  access: false
wake:
  hold: 0s
  failure_backoff: 10ms
homes:
  - id: demo
    target: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
    kind: api
    health: {interval: 1h}
    min_refresh: 1h
`)
	gw := &appGateway{g: e2e.g, base: "http://" + e2e.addr, data: e2e.data, logs: e2e.logs}
	if code, _, body := gw.get(t, "/apps/demo/whoami", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("the app of a home whose program exits at once: %d %s", code, body)
	}
	// An observation (as an operator's refresh or the next check makes
	// one) finds the home failed.
	testbin.Eventually(t, "an observation to find the home failed", func() bool {
		st, err := gw.g.Apps().RefreshSince(context.Background(), "demo", time.Now())
		return err == nil && st.Reason == appstatus.ReasonRuntimeFailed
	})
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the home to answer on its own route once it can start", func() bool {
		code, _, _ := gw.get(t, "/node/demo/whoami", nil)
		return code == http.StatusOK
	})
	code, _, body := gw.get(t, "/apps/demo/whoami", nil)
	if code != http.StatusOK || !strings.Contains(body, `"path":"/apps/demo/whoami"`) {
		t.Fatalf("the app once its home runs again: %d %s; want it observed again and served", code, body)
	}
}
