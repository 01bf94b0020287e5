package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestRestartFreesTheLocksOfAnEarlierRun: a gateway killed while it held a
// home's lifecycle lock leaves the lease in Redis, bound to its heartbeat.
// Started again under the same instance name, it reports that heartbeat
// again at once, which would keep the lease alive for its whole ttl; it
// frees the lease as it starts instead, and its first request wakes the
// home rather than waiting on the lock.
func TestRestartFreesTheLocksOfAnEarlierRun(t *testing.T) {
	t.Parallel()
	srv := registrytest.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	st, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: "rerun"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	// What the earlier run of gw-0 left: its heartbeat, and home h1's lock
	// bound to it for a minute.
	if err := st.ReportSessions(ctx, "gw-0", nil, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lock(ctx, "home/h1", "gw-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	command := fmt.Sprintf(`[%q, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}"]`, testbin.Build(t))
	gw := e2eStartWithCommand(t, command, fmt.Sprintf(`instance: gw-0
redis:
  url: %q
  prefix: rerun
wake:
  ready_timeout: 5s
  wake_timeout: 8s
homes:
  - id: h1
`, srv.URL()))
	res, err := e2eClient(t).Get("http://" + gw.addr + "/node/h1/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("first request after the restart: %d %s\n%s", res.StatusCode, body, gw.logs.String())
	}
	if n := strings.Count(gw.logs.String(), "released the locks an earlier run of this instance held"); n != 1 {
		t.Errorf("%d log lines about the release, want one", n)
	}
}
