package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/provider/exec/procid"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestRestartFreesTheLocksOfAnEarlierRun: a gateway killed while it held a
// home's lifecycle lock leaves the lease in Redis, bound to its heartbeat.
// The earlier run here left no claim on its name (a version that made
// none, or a run on another machine), so the start waits for its
// heartbeat to lapse.
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

// TestStopWithdrawsTheHeartbeat: a gateway's report names the process
// that runs it; a gateway that stops deletes its session report instead
// of letting it run out, so the fleet counts it gone at once, and its
// next run under the same name starts without waiting for the report to
// lapse.
func TestStopWithdrawsTheHeartbeat(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "stop")
	first, err := newFleetGateway(t, srv.URL(), "stop", "gw-0")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if rep := awaitReport(ctx, t, st, "gw-0"); rep.Run != fmt.Sprintf("pid %d on %s", os.Getpid(), host) {
		t.Errorf("the fleet's report names the run of gw-0 as %q; want this process", rep.Run)
	}
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

// TestTwinsStartingTogetherOneStarts: two gateways under one instance name
// that start in the same instant both find no heartbeat; their claims on
// the name, run one after the other by the server, let one start and
// refuse the other.
func TestTwinsStartingTogetherOneStarts(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "twins")
	errs := make(chan error, 2)
	var ready sync.WaitGroup
	ready.Add(2)
	for range 2 {
		go func() {
			ready.Done()
			ready.Wait() // both start together
			_, err := newFleetGateway(t, srv.URL(), "twins", "gw-twin")
			errs <- err
		}()
	}
	var started, refused int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			started++
		case strings.Contains(err.Error(), "another live gateway reports under this name"):
			refused++
		default:
			t.Errorf("a twin's start failed with %v", err)
		}
	}
	if started != 1 || refused != 1 {
		t.Fatalf("%d twins started and %d were refused; want one of each", started, refused)
	}
	awaitReport(ctx, t, st, "gw-twin")
}

// TestRestartAfterACrashHereTakesTheNameAtOnce: a gateway that finds under
// its name the claim and heartbeat of an earlier run on this machine whose
// process has ended (killed, crashed) takes the name over at once, without
// waiting for the heartbeat to lapse, and frees that run's locks.
func TestRestartAfterACrashHereTakesTheNameAtOnce(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "crash")
	// The earlier run: a process of this machine, ended since.
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	stat, err := procid.ReadStat(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = dead.Process.Kill()
	_ = dead.Wait()
	host, _ := os.Hostname()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no pid namespace to name: %v", err)
	}
	about, _ := json.Marshal(map[string]any{"host": host, "pidns": ns, "pid": stat.PID, "exe": stat.Exe, "start": stat.Start, "boot": stat.Boot})
	if err := st.ClaimName(ctx, "gw-0", "earlier-run", string(about), "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.ReportSessions(ctx, "gw-0", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Lock(ctx, "home/h1", "gw-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	gw, err := newFleetGateway(t, srv.URL(), "crash", "gw-0")
	if err != nil {
		t.Fatalf("the restart after a crash: %v", err)
	}
	logs := gw.logs.String()
	if strings.Contains(logs, "waiting for it to lapse") || !strings.Contains(logs, "the earlier run under this instance name has ended") {
		t.Errorf("the restart did not take the name at once (after %s):\n%s", time.Since(began), logs)
	}
	if !strings.Contains(logs, "released the locks an earlier run of this instance held") {
		t.Errorf("the earlier run's lock was not released:\n%s", logs)
	}
	h, live, err := st.NameHolder(ctx, "gw-0")
	if err != nil || !live || h.Nonce == "earlier-run" {
		t.Errorf("the claim after the restart: %+v, %v, %v; want the new run's", h, live, err)
	}
}

// TestGatewayThatLostItsNameStepsOut: a gateway whose name another run
// took over (as after a pause past its heartbeat's TTL, or a partition)
// has its heartbeats refused from then on: it says so once in its log,
// answers /readyz with 503 so that the edge sends traffic elsewhere, and
// leaves the new run's heartbeat in place.
func TestGatewayThatLostItsNameStepsOut(t *testing.T) {
	t.Parallel()
	srv, st, ctx := fleetRedis(t, "lost")
	old, err := newFleetGateway(t, srv.URL(), "lost", "gw-0")
	if err != nil {
		t.Fatal(err)
	}
	awaitReport(ctx, t, st, "gw-0")
	h, live, err := st.NameHolder(ctx, "gw-0")
	if err != nil || !live {
		t.Fatalf("the gateway's claim: %+v, %v, %v", h, live, err)
	}
	// A new run takes the name over, as one started while this one was
	// paused would once its claim lapsed.
	if err := st.ClaimName(ctx, "gw-0", "new-run", `{"host":"elsewhere"}`, h.Nonce, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.ReportSessions(ctx, "gw-0", map[string]int{"h9": 3}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(old.logs.String(), "another run took over its instance name") {
		select {
		case <-ctx.Done():
			t.Fatalf("the gateway never said it lost its name:\n%s", old.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	res, err := e2eClient(t).Get("http://" + old.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "instance name taken over") {
		t.Errorf("/readyz of the gateway that lost its name: %d %q, want 503 saying the name was taken over",
			res.StatusCode, body)
	}
	time.Sleep(1500 * time.Millisecond) // more heartbeats of the old run
	if n := strings.Count(old.logs.String(), "another run took over its instance name"); n != 1 {
		t.Errorf("%d log lines about the lost name, want one", n)
	}
	if n, err := st.FleetSessions(ctx, "h9"); err != nil || n != 3 {
		t.Errorf("the new run's report after the old run's heartbeats: %d sessions, %v; want 3", n, err)
	}
	old.stop(t)
	if n, _ := st.FleetSessions(ctx, "h9"); n != 3 {
		t.Errorf("the old run's stop withdrew the new run's report: %d sessions, want 3", n)
	}
}
