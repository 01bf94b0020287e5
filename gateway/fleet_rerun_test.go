package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry"
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
	srv, st, ctx := fleetRedis(t, "rerun")
	command := fmt.Sprintf(`[%q, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}"]`, testbin.Build(t))
	// What the earlier run of gw-0 left: its heartbeat, and home h1's lock
	// bound to it for a minute. The heartbeat is still live when gw-0
	// starts (the binary is built first), so the start waits for it.
	if err := st.ReportSessions(ctx, "gw-0", nil, 8*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lock(ctx, "home/h1", "gw-0", time.Minute); err != nil {
		t.Fatal(err)
	}
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
	if !strings.Contains(gw.logs.String(), "waiting for it to lapse") || !strings.Contains(gw.logs.String(), "the earlier run's heartbeat lapsed") {
		t.Errorf("the start did not wait for the earlier run's heartbeat to lapse:\n%s", gw.logs.String())
	}
}

// fleetGateway is a gateway of a fleet on a real Redis, served on
// loopback, that the test stops itself.
type fleetGateway struct {
	g      *gateway.Gateway
	addr   string
	logs   *testbin.LogBuffer
	cancel context.CancelFunc
	served chan error
	once   sync.Once
}

// newFleetGateway builds a gateway named instance on the Redis at url;
// it returns gateway.New's error as is.
func newFleetGateway(t *testing.T, url, prefix, instance string) (*fleetGateway, error) {
	t.Helper()
	text := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\ninstance: %s\nredis:\n  url: %q\n  prefix: %s\n",
		filepath.Join(t.TempDir(), "data"), instance, url, prefix)
	cfg, err := all.Load("fleet.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fg := &fleetGateway{g: g, addr: ln.Addr().String(), logs: logs, cancel: cancel, served: make(chan error, 1)}
	go func() { fg.served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() { fg.stop(t) })
	return fg, nil
}

// stop ends Serve and closes the gateway, once.
func (fg *fleetGateway) stop(t *testing.T) {
	fg.once.Do(func() {
		fg.cancel()
		if err := <-fg.served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		fg.g.Close()
	})
}

// fleetRedis starts a real Redis for the test and opens the fleet's store
// on it under prefix, as a gateway would; ctx bounds the test's waits.
func fleetRedis(t *testing.T, prefix string) (*registrytest.RedisServer, *redis.Store, context.Context) {
	t.Helper()
	srv := registrytest.StartRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	t.Cleanup(cancel)
	st, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return srv, st, ctx
}

// awaitReport waits until instance has a live session report.
func awaitReport(ctx context.Context, t *testing.T, st *redis.Store, instance string) registry.InstanceReport {
	t.Helper()
	for {
		reps, err := st.Reports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reps {
			if r.Instance == instance {
				return r
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no heartbeat of %s", instance)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestSecondGatewayUnderOneNameRefusesToStart: two gateways of a fleet
// under one instance name would share their locks, and the second, as it
// starts, would free the first's live ones. The second sees the first's
// heartbeat renewed while it waits, and refuses to start with the fix;
// the first keeps its heartbeat and its locks.
func TestSecondGatewayUnderOneNameRefusesToStart(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "dup")
	first, err := newFleetGateway(t, srv.URL(), "dup", "gw-dup")
	if err != nil {
		t.Fatal(err)
	}
	awaitReport(ctx, t, st, "gw-dup")
	// A lock the first gateway holds, as a wake of its would.
	lease, err := st.Lock(ctx, "home/h1", "gw-dup", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	_, err = newFleetGateway(t, srv.URL(), "dup", "gw-dup")
	if err == nil || !strings.Contains(err.Error(), "another live gateway reports under this name") ||
		!strings.Contains(err.Error(), "set instance") {
		t.Fatalf("the second gateway under one name started, or failed with %v; want a start that fails naming the duplicate and the fix", err)
	}
	if _, err := st.Renew(ctx, lease, time.Minute); err != nil {
		t.Fatalf("the first gateway's lock after the second's start: %v", err)
	}
	awaitReport(ctx, t, st, "gw-dup")
	if strings.Contains(first.logs.String(), "level=ERROR") {
		t.Errorf("the first gateway logged errors:\n%s", first.logs.String())
	}
}

// TestStopWithdrawsTheHeartbeat: a gateway that stops deletes its
// session report instead of letting it run out, so the fleet counts it
// gone at once, and its next run under the same name starts without
// waiting for the report to lapse.
func TestStopWithdrawsTheHeartbeat(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "stop")
	first, err := newFleetGateway(t, srv.URL(), "stop", "gw-0")
	if err != nil {
		t.Fatal(err)
	}
	awaitReport(ctx, t, st, "gw-0")
	first.stop(t)
	reps, err := st.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Instance == "gw-0" {
			t.Fatalf("a stopped gateway's heartbeat is still live: %+v", r)
		}
	}
	second, err := newFleetGateway(t, srv.URL(), "stop", "gw-0")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(second.logs.String(), "waiting for it to lapse") {
		t.Errorf("the next run waited for a heartbeat:\n%s", second.logs.String())
	}
	awaitReport(ctx, t, st, "gw-0")
}
