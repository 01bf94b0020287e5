package faultinject

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// Fleet tests: several real gateway processes share one real redis-server
// (registrytest.StartRedis) and behave as one gateway.

// fleetStart starts n gateways named gw-0... on srv, each in a directory
// (and data_dir) of its own, with o's config plus the redis section.
func fleetStart(t *testing.T, srv *registrytest.RedisServer, n int, o fiOptions) []*fiGateway {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = srv.URL()
	}
	gws := fleetConfigsVia(t, urls, o)
	for _, g := range gws {
		g.start(t)
	}
	return gws
}

// fleetHomePIDs returns the live processes of home id started by any
// gateway of gws.
func fleetHomePIDs(t *testing.T, gws []*fiGateway, id string) []int {
	t.Helper()
	var pids []int
	for _, g := range gws {
		pids = append(pids, g.homePIDs(t, id)...)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// fleetClient is an HTTP client for many concurrent requests.
func fleetClient() *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
}

func TestFleetOneWakeForConcurrentRequests(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 3, fiOptions{boot: "1s"})
	c := fleetClient()
	const requests = 500
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
		errs   []string
	)
	start := make(chan struct{})
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, body, err := gws[i%len(gws)].get(c, fiWhoami)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			status[res.StatusCode]++
			if res.StatusCode != http.StatusOK && len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("gw-%d: %d %s", i%len(gws), res.StatusCode, body))
			}
		}()
	}
	close(start)
	wg.Wait()
	if status[http.StatusOK] != requests {
		t.Fatalf("statuses %v over %d requests, want all 200; first errors: %v", status, requests, errs)
	}
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 1 {
		t.Fatalf("home processes %v across the fleet, want exactly one", pids)
	}
	// One gateway started the home: its wake is the one cold wake. Each
	// other gateway whose callers waited for it says so (cause=waited,
	// naming the gateway that woke it), or only proved the running home
	// (verify) if its first request came after the wake.
	causes := map[string]int{}
	runner := ""
	for i, g := range gws {
		for _, line := range strings.Split(g.Output(), "\n") {
			if !strings.Contains(line, "msg=wake ") {
				continue
			}
			cause := logField(line, "cause")
			causes[cause]++
			if cause == "cold" {
				runner = fmt.Sprintf("gw-%d", i)
			}
		}
	}
	others := 0
	for cause, n := range causes {
		if cause != "cold" && cause != "waited" && cause != "verify" {
			others += n
		}
	}
	if causes["cold"] != 1 || others != 0 {
		t.Fatalf("wake causes across the fleet %v, want one cold and the others waited or verify", causes)
	}
	for i, g := range gws {
		for _, line := range strings.Split(g.Output(), "\n") {
			if strings.Contains(line, "msg=wake ") && logField(line, "cause") == "waited" && logField(line, "runner") != runner {
				t.Errorf("gw-%d: a waited wake names runner %q, want %s, the gateway that woke the home:\n%s", i, logField(line, "runner"), runner, line)
			}
		}
	}
	t.Logf("%d requests over %d gateways: one home process; wake causes %v", requests, len(gws), causes)
}

// fleetTwoHomes are h1 at /node/alice and h2 at /node/bob.
var fleetTwoHomes = []any{
	map[string]any{"id": "h1", "target": "alice"},
	map[string]any{"id": "h2", "target": "bob"},
}

func TestFleetRedisDown(t *testing.T) {
	srv := registrytest.StartRedis(t)
	// A short warm TTL: verdicts run out while Redis is down, so warm
	// homes are proven again from local state.
	gws := fleetStart(t, srv, 2, fiOptions{
		wake:  map[string]any{"warm_ttl": "500ms", "retry_after": "2s"},
		extra: map[string]any{"homes": fleetTwoHomes},
		admin: true,
	})
	c := fleetClient()
	for _, g := range gws {
		if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("warm up %s: %v %v", g.url, err, body)
		}
	}
	srv.Kill()
	for _, g := range gws {
		testbin.Eventually(t, "/readyz says degraded: store unreachable", func() bool { return readyz(g) == "degraded: store unreachable" })
	}

	// Warm routes: zero errors across more than three warm TTLs.
	warmErrs, warm := 0, 0
	until := time.Now().Add(2 * time.Second)
	for time.Now().Before(until) {
		for _, g := range gws {
			res, _, err := g.get(c, fiWhoami)
			warm++
			if err != nil || res.StatusCode != http.StatusOK {
				warmErrs++
			}
		}
	}
	if warmErrs != 0 {
		t.Fatalf("%d of %d requests to a warm home failed while Redis was down", warmErrs, warm)
	}

	// Cold wakes: 503 with Retry-After, timed.
	var lat []time.Duration
	for i := range 60 {
		g := gws[i%len(gws)]
		t0 := time.Now()
		res, body, err := g.get(c, "/node/bob/whoami")
		lat = append(lat, time.Since(t0))
		if err != nil {
			t.Fatalf("cold wake while Redis is down: %v", err)
		}
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("cold wake while Redis is down: %d (Retry-After %q) %s, want 503 with Retry-After",
				res.StatusCode, res.Header.Get("Retry-After"), body)
		}
		if !strings.Contains(body, "state_unavailable") {
			t.Fatalf("cold wake while Redis is down: body %s, want code state_unavailable", body)
		}
	}
	slices.Sort(lat)
	t.Logf("Redis down: %d warm requests, 0 errors; cold wakes 503 p50 %s p99 %s max %s",
		warm, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	status, body := gws[0].adminStatusOrEmpty(t)
	if status != 0 && !strings.Contains(body, "degraded") {
		t.Fatalf("admin status while Redis is down: %d %s, want it to say degraded", status, body)
	}

	srv.Restart()
	for _, g := range gws {
		testbin.Eventually(t, "/readyz says ready again", func() bool { return readyz(g) == "ready" })
	}
	for _, g := range gws {
		testbin.Eventually(t, "a cold wake works again without a gateway restart", func() bool {
			res, _, err := g.get(c, "/node/bob/whoami")
			return err == nil && res.StatusCode == http.StatusOK
		})
	}
	if pids := fleetHomePIDs(t, gws, "h2"); len(pids) != 1 {
		t.Fatalf("processes of h2 across the fleet after Redis came back: %v, want one", pids)
	}
}

// readyz returns the body of g's /readyz, trimmed ("" on an error).
func readyz(g *fiGateway) string {
	res, err := http.Get(g.url + "/readyz")
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return strings.TrimSpace(string(b))
}

// adminStatusOrEmpty returns GET /admin/status when the admin listener is
// on, else 0.
func (g *fiGateway) adminStatusOrEmpty(t *testing.T) (int, string) {
	if g.admin == "" {
		return 0, ""
	}
	return g.adminDo(t, http.MethodGet, "/admin/status")
}

// metric returns the value of an unlabelled metric from g's /metrics.
func (g *fiGateway) metric(t *testing.T, name string) float64 {
	t.Helper()
	_, body := g.adminDo(t, http.MethodGet, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestFleetSessionsAcrossInstances(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{wake: map[string]any{"idle_timeout": "1s"}, admin: true})
	a, b := gws[0], gws[1]
	store := openFleetStore(t, srv)
	c := fleetClient()
	if res, body, err := a.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("wake through A: %v %s", err, body)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.url, "http")+"/node/"+fiTarget+"/ws", nil)
	if err != nil {
		t.Fatalf("open a WebSocket through A: %v", err)
	}
	defer conn.Close()
	testbin.Eventually(t, "A's session report in the store", func() bool {
		n, err := store.FleetSessions(context.Background(), fiHome)
		return err == nil && n >= 1
	})
	// B serves the home once, then has no session on it: its own idle
	// clock runs out after 1s.
	if res, body, err := b.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("request through B: %v %s", err, body)
	}
	pids := fleetHomePIDs(t, gws, fiHome)
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	// Ten idle ticks of B past its idle timeout (the tick is 250ms): each
	// one found the home idle on B and in use on A.
	ticks := b.metric(t, "wakegate_idle_ticks_total")
	testbin.Eventually(t, "ten idle ticks of B", func() bool { return b.metric(t, "wakegate_idle_ticks_total") >= ticks+10 })
	for _, g := range gws {
		if strings.Contains(g.Output(), "msg=suspend ") {
			t.Fatalf("a home with a WebSocket open through A was suspended:\n%s", g.Output())
		}
	}
	if now := fleetHomePIDs(t, gws, fiHome); !slices.Equal(now, pids) {
		t.Fatalf("home processes %v after B's idle ticks, want %v untouched", now, pids)
	}

	// `wakegate status --json` on B lists both instances, A with its
	// session, each with the version it runs; `wakegate status` prints
	// them.
	testbin.Eventually(t, "status --json lists the fleet", func() bool {
		code, out := fiRun(t, b.dir, "status", "--json", "--admin", b.admin, "--token", fiToken)
		var st admin.Status
		if code > 1 || json.Unmarshal([]byte(out), &st) != nil || len(st.Fleet) != 2 {
			return false
		}
		return st.Fleet[0].Instance == "gw-0" && st.Fleet[0].Sessions >= 1 && st.Fleet[1].Instance == "gw-1" &&
			st.Version != "" && st.Fleet[0].Version == st.Version && st.Fleet[1].Version == st.Version
	})
	if code, out := fiRun(t, b.dir, "status", "--admin", b.admin, "--token", fiToken); code > 1 ||
		!strings.Contains(out, "INSTANCE") || !strings.Contains(out, "gw-0") || !strings.Contains(out, "gw-1") {
		t.Errorf("status: exit %d, want the fleet's instances listed:\n%s", code, out)
	}

	// A dies with its session open: its count expires within the
	// heartbeat TTL, and B then suspends the home.
	a.kill(t)
	testbin.Eventually(t, "A's sessions expire", func() bool {
		n, err := store.FleetSessions(context.Background(), fiHome)
		return err == nil && n == 0
	})
	testbin.Eventually(t, "B suspends the home once A's sessions expired", func() bool {
		return strings.Contains(b.Output(), "msg=suspend component=wake home=h1")
	})
	testbin.Eventually(t, "the home's process is gone", func() bool { return len(fleetHomePIDs(t, gws, fiHome)) == 0 })
}

// openFleetStore opens the fleet tests' store on srv, to watch it.
func openFleetStore(t *testing.T, srv *registrytest.RedisServer) *redis.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: "fleet"})
	if err != nil {
		t.Fatalf("open the fleet's store: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestFleetLeaseHolderDiesMidWake(t *testing.T) {
	srv := registrytest.StartRedis(t)
	// The home boots for 3s; the wake's lease is the ready timeout (4s)
	// plus the engine's slack (30s), but it dies with A's heartbeat: B
	// takes over once that runs out (fleet_locks_test.go).
	gws := fleetStart(t, srv, 2, fiOptions{boot: "3s",
		wake: map[string]any{"ready_timeout": "4s", "wake_timeout": "5s", "retry_after": "1s"}})
	a, b := gws[0], gws[1]
	c := fleetClient()
	store := openFleetStore(t, srv)
	go func() { _, _, _ = a.get(c, fiWhoami) }() // A takes the lease and starts the home
	// Killed while it probes the home it started and recorded (a gateway
	// killed between starting a process and recording it leaves that
	// process to no one: see the fleet notes).
	testbin.Eventually(t, "A records the home it started", func() bool {
		h, err := store.GetHome(context.Background(), fiHome)
		return err == nil && h.ProviderRef != "" && h.Status == registry.StatusWaking
	})
	a.kill(t)
	started := time.Now()
	deadline := started.Add(2 * time.Minute)
	for {
		res, body, err := b.get(c, fiWhoami)
		if err == nil && res.StatusCode == http.StatusOK {
			break
		}
		if err == nil && res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("B while A's lease stands: %d %s, want 503 or 200", res.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never completed the wake after A died holding the lease:\n%s", b.Output())
		}
	}
	t.Logf("B completed the wake %s after A died holding the lease", time.Since(started).Round(time.Millisecond))
	if pids := fleetHomePIDs(t, gws, fiHome); len(pids) != 1 {
		t.Fatalf("home processes %v after the takeover, want the one A started", pids)
	}
}

func TestFleetAdminHomeAppearsEverywhere(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{admin: true})
	a, b := gws[0], gws[1]
	req, err := http.NewRequest(http.MethodPut, a.admin+"/admin/homes/h9", strings.NewReader(`{"target":"zed"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fiToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /admin/homes/h9 on A: %d %s", res.StatusCode, body)
	}
	c := fleetClient()
	testbin.Eventually(t, "the home registered on A answers through B", func() bool {
		res, _, err := b.get(c, "/node/zed/whoami")
		return err == nil && res.StatusCode == http.StatusOK
	})
	if pids := fleetHomePIDs(t, gws, "h9"); len(pids) != 1 {
		t.Fatalf("processes of h9 %v, want one", pids)
	}
}

// logField is the value of key in a text log line (key=value, or
// key="quoted value"); "" when the line has no such key.
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			if u, err := strconv.Unquote(s); err == nil {
				return u
			}
		}
		return ""
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}
