package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

const (
	wkHome   = "h1"
	wkTarget = "alice"
	// wkProbePath is where the gateway's ws readiness probe upgrades.
	wkProbePath = "/node/" + wkTarget
	wkWhoami    = "/node/" + wkTarget + "/whoami"
)

// wkOptions shape a gateway config; the zero value is one exec home
// (h1 at /node/alice) with a 200ms boot, a 1m warm TTL and no idle suspend.
type wkOptions struct {
	boot string         // demo home --boot-delay
	args []string       // extra demo-home arguments
	wake map[string]any // overrides under wake:
	home map[string]any // overrides of the home
	// keepRunning sets exec.keep_running_on_shutdown, for tests that
	// restart the gateway and expect it to adopt the running home.
	keepRunning bool
	// extra is YAML appended at the top level of the config (wkStart).
	extra string
}

// wkConfig returns the YAML config with %ADDR% and %DATA% left for the
// caller (testbin.ServeIn or wkStart) to fill.
func wkConfig(t testing.TB, o wkOptions) string {
	t.Helper()
	if o.boot == "" {
		o.boot = "200ms"
	}
	cmd := append([]string{testbin.Build(t), "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
		"--version", "{version}", "--boot-delay", o.boot}, o.args...)
	w := map[string]any{"warm_ttl": "1m", "ready_timeout": "10s", "wake_timeout": "20s", "hold": "5s",
		"idle_timeout": "0s", "retry_after": "2s"}
	for k, v := range o.wake {
		w[k] = v
	}
	h := map[string]any{"id": wkHome, "target": wkTarget}
	for k, v := range o.home {
		h[k] = v
	}
	cfg := map[string]any{
		"listen": "%ADDR%", "data_dir": "%DATA%", "instance": "e2e",
		"log":    map[string]any{"format": "text", "level": "info", "access": false},
		"server": map[string]any{"drain_grace": "2s"},
		"wake":   w,
		"exec":   map[string]any{"command": cmd, "stop_grace": "2s", "keep_running_on_shutdown": o.keepRunning},
		"homes":  []any{h},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wkGateway is an in-process gateway serving on a loopback listener.
type wkGateway struct {
	t      *testing.T
	g      *gateway.Gateway
	url    string // http://host:port
	addr   string
	data   string
	logs   *testbin.LogBuffer
	client *http.Client
	stop   func() // stops the gateway (idempotent); the test's cleanup also calls it
}

func wkStart(t *testing.T, o wkOptions) *wkGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	text := strings.NewReplacer("%ADDR%", ln.Addr().String(), "%DATA%", data).Replace(wkConfig(t, o)) + o.extra
	cfg, err := all.Load("e2e.yaml", []byte(text))
	if err != nil {
		_ = ln.Close()
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, gateway.NewLogger(cfg.Log, logs))
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	gw := &wkGateway{t: t, g: g, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(),
		data: data, logs: logs,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}, Timeout: 60 * time.Second}}
	gw.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close() // the provider stops supervising before its homes are killed
		testbin.KillHomes(data)
		gw.client.CloseIdleConnections()
	})
	t.Cleanup(func() {
		gw.stop()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	return gw
}

func (gw *wkGateway) homeDir() string { return filepath.Join(gw.data, "homes", wkHome) }

// do sends a request with the given headers and returns the response with
// its body read.
func (gw *wkGateway) do(method, path string, hdr map[string]string) (*http.Response, string) {
	gw.t.Helper()
	res, body, err := wkSend(gw.client, method, gw.url+path, hdr)
	if err != nil {
		gw.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res, body
}

func wkSend(c *http.Client, method, url string, hdr map[string]string) (*http.Response, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return nil, "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, "", err
	}
	return res, string(b), nil
}

// mustOK sends GET path and fails unless the answer is 200.
func (gw *wkGateway) mustOK(path string, hdr map[string]string) *http.Response {
	gw.t.Helper()
	res, body := gw.do(http.MethodGet, path, hdr)
	if res.StatusCode != http.StatusOK {
		gw.t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return res
}

// stats reads the demo home's counters straight from its endpoint.
func wkStats(t testing.TB, endpoint string) demohome.Stats {
	t.Helper()
	res, err := http.Get(endpoint + "/_demo/stats")
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	defer res.Body.Close()
	var s demohome.Stats
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		t.Fatalf("stats: %v", err)
	}
	return s
}

// wkEndpoint finds the home's endpoint from the port its process listens on,
// as recorded in the exec provider's "started home" or "adopted" log line.
func wkEndpoint(t testing.TB, logs string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="exec: (?:started|adopted running) home".* port=(\d+)`).FindAllStringSubmatch(logs, -1)
	if len(m) == 0 {
		t.Fatal("no started home in the log")
	}
	return "http://127.0.0.1:" + m[len(m)-1][1]
}

var wkField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

func wkFields(line string) map[string]string {
	out := map[string]string{}
	for _, m := range wkField.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[m[1]] = v
	}
	return out
}

func wkOnePID(t testing.TB, dir string) int {
	t.Helper()
	pids := testbin.HomePIDs(t, dir)
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want exactly one", pids)
	}
	return pids[0]
}

// Check 1 and 13: one process for 500 concurrent cold requests, one wake
// line, and Server-Timing on exactly the responses that waited for it.
func TestWakeE2EConcurrentColdRequests(t *testing.T) {
	gw := wkStart(t, wkOptions{})
	const n = 500
	type answer struct {
		code   int
		timing string
		err    error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, _, err := wkSend(gw.client, http.MethodGet, gw.url+wkWhoami, nil)
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i] = answer{code: res.StatusCode, timing: res.Header.Get("Server-Timing")}
		}()
	}
	close(start)
	wg.Wait()
	timed := 0
	for i, a := range answers {
		if a.err != nil || a.code != http.StatusOK {
			t.Fatalf("request %d: %d %v", i, a.code, a.err)
		}
		if a.timing != "" {
			if !regexp.MustCompile(`^wake;dur=\d+$`).MatchString(a.timing) {
				t.Fatalf("request %d: Server-Timing %q", i, a.timing)
			}
			timed++
		}
	}
	if c := strings.Count(gw.logs.String(), `msg="exec: started home"`); c != 1 {
		t.Fatalf("exec started %d homes, want 1", c)
	}
	wkOnePID(t, gw.homeDir())
	var lines []string
	testbin.Eventually(t, "the wake's log line", func() bool { lines = gw.logs.Lines("wake"); return len(lines) > 0 })
	if len(lines) != 1 {
		t.Fatalf("%d wake lines, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	f := wkFields(lines[0])
	for _, k := range []string{"home", "outcome", "cause", "joined", "provider_ms", "probe_ms", "total_ms"} {
		if f[k] == "" {
			t.Fatalf("wake line lacks %s: %s", k, lines[0])
		}
	}
	if f["home"] != wkHome || f["outcome"] != "ready" {
		t.Fatalf("wake line: %s", lines[0])
	}
	// The caller that started the wake and every caller that joined it
	// waited; the rest were warm hits.
	if f["joined"] != strconv.Itoa(timed-1) {
		t.Fatalf("joined=%s but %d responses carry Server-Timing", f["joined"], timed)
	}
	// A warm hit did not wait and says nothing about a wake.
	if res := gw.mustOK(wkWhoami, nil); res.Header.Get("Server-Timing") != "" {
		t.Fatalf("warm response carries Server-Timing %q", res.Header.Get("Server-Timing"))
	}
}

// Check 2: within warm_ttl no request is probed.
func TestWakeE2EWarmVerdictSkipsProbe(t *testing.T) {
	gw := wkStart(t, wkOptions{})
	gw.mustOK(wkWhoami, nil)
	ep := wkEndpoint(t, gw.logs.String())
	before := wkStats(t, ep)
	if before.Paths[wkProbePath] < 1 {
		t.Fatalf("the wake's probe did not reach %s: %v", wkProbePath, before.Paths)
	}
	for range 20 {
		gw.mustOK(wkWhoami, nil)
	}
	after := wkStats(t, ep)
	if after.Paths[wkProbePath] != before.Paths[wkProbePath] {
		t.Fatalf("probes at %s grew from %d to %d over 20 warm requests",
			wkProbePath, before.Paths[wkProbePath], after.Paths[wkProbePath])
	}
	if got := after.Paths[wkWhoami]; got != 21 {
		t.Fatalf("home saw %d whoami requests, want 21", got)
	}
}

// Check 3: a killed home is woken again and the client sees a success.
func TestWakeE2EKilledHomeWakesAgain(t *testing.T) {
	gw := wkStart(t, wkOptions{})
	gw.mustOK(wkWhoami, nil)
	old := wkOnePID(t, gw.homeDir())
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gw.mustOK(wkWhoami, nil)
	if pid := wkOnePID(t, gw.homeDir()); pid == old {
		t.Fatalf("the killed process %d still answers", old)
	}
}

// Check 4: a home slower than ready_timeout fails every waiting caller with
// 503 and Retry-After, caches no verdict and is left stopped.
func TestWakeE2EReadyTimeout(t *testing.T) {
	gw := wkStart(t, wkOptions{boot: "3s", wake: map[string]any{"ready_timeout": "500ms"}})
	const n = 20
	type answer struct {
		code  int
		retry string
		err   error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := wkSend(gw.client, http.MethodGet, gw.url+wkWhoami, map[string]string{"Accept": "application/json"})
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i] = answer{code: res.StatusCode, retry: res.Header.Get("Retry-After")}
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.code != http.StatusServiceUnavailable {
			t.Fatalf("caller %d: %d %v, want 503", i, a.code, a.err)
		}
		if s, err := strconv.Atoi(a.retry); err != nil || s <= 0 {
			t.Fatalf("caller %d: Retry-After %q", i, a.retry)
		}
	}
	if gw.g.Engine().Warm(wkHome) {
		t.Fatal("a failed wake left a warm verdict")
	}
	// The callers go before the half-woken home is stopped: wait for the
	// stop's record.
	testbin.Eventually(t, "the stop of the half-woken home", func() bool { return gw.g.Engine().LastStop(wkHome) != nil })
	if ls := gw.g.Engine().LastStop(wkHome); !ls.Proven {
		t.Fatalf("the stop of the half-woken home is not proven: %+v", ls)
	}
	if pids := testbin.HomePIDs(t, gw.homeDir()); len(pids) != 0 {
		t.Fatalf("half-woken home left running: %v", pids)
	}
}

// Check 5: an open WebSocket keeps its home from idle suspend; once it
// closes the home is suspended.
func TestWakeE2EWebSocketBlocksIdleSuspend(t *testing.T) {
	gw := wkStart(t, wkOptions{wake: map[string]any{"idle_timeout": "300ms"}})
	conn, res, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/"+wkTarget+"/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	res.Body.Close()
	defer conn.Close()
	if _, hello, err := conn.ReadMessage(); err != nil || !strings.Contains(string(hello), `"hello":"alice"`) {
		t.Fatalf("hello: %q %v", hello, err)
	}
	pid := wkOnePID(t, gw.homeDir())
	// Five idle timeouts: twenty rounds of the idle loop, which checks
	// every quarter of the timeout.
	from := gw.g.Engine().Stats().IdleTicks
	testbin.Eventually(t, "twenty idle ticks", func() bool { return gw.g.Engine().Stats().IdleTicks >= from+20 })
	if got := wkOnePID(t, gw.homeDir()); got != pid {
		t.Fatalf("home process changed from %d to %d under an open socket", pid, got)
	}
	if err := conn.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if _, echo, err := conn.ReadMessage(); err != nil || string(echo) != "still here" {
		t.Fatalf("echo: %q %v", echo, err)
	}
	if n := len(gw.logs.Lines("suspend")); n != 0 {
		t.Fatalf("%d suspends of a home with an open socket", n)
	}
	_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	conn.Close()
	testbin.Eventually(t, "the home is suspended after its socket closed", func() bool {
		return len(testbin.HomePIDs(t, gw.homeDir())) == 0 && gw.g.Engine().Sleeping(wkHome)
	})
	gw.stop()
	store, err := bolt.Open(filepath.Join(gw.data, "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec, err := store.GetHome(context.Background(), wkHome)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != registry.StatusSuspended || rec.WantRunning {
		t.Fatalf("stored home after idle suspend: %+v", rec)
	}
}

// Check 6: the waiting page goes only to navigations; API and asset
// callers are held until the home answers.
func TestWakeE2EWaitingPage(t *testing.T) {
	gw := wkStart(t, wkOptions{boot: "1s", wake: map[string]any{"hold": "0s"}})
	nav := map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
	res, body := gw.do(http.MethodGet, "/node/"+wkTarget+"/", nav)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("navigation to a cold home: %d, want the waiting page (503)", res.StatusCode)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("waiting page Cache-Control %q", cc)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("waiting page Content-Type %q", ct)
	}
	statusURL := "/_wakegate/wake/node/" + wkTarget
	if !strings.Contains(body, statusURL) {
		t.Fatalf("waiting page does not name its status URL %s:\n%s", statusURL, body)
	}
	// Both are held through the wake the navigation started.
	var wg sync.WaitGroup
	for _, accept := range []string{"application/json", "image/avif,image/webp,image/*,*/*;q=0.8"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, body, err := wkSend(gw.client, http.MethodGet, gw.url+wkWhoami, map[string]string{"Accept": accept})
			if err != nil || res.StatusCode != http.StatusOK {
				t.Errorf("Accept %s: %v %v", accept, res, err)
				return
			}
			if !strings.Contains(body, `"method"`) {
				t.Errorf("Accept %s: not the home's answer: %s", accept, body)
			}
		}()
	}
	wg.Wait()
	res, body = gw.do(http.MethodGet, statusURL, nil)
	var st struct {
		Ready *bool `json:"ready"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Ready == nil || !*st.Ready {
		t.Fatalf("status after the wake: %d %s", res.StatusCode, body)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status Cache-Control %q", res.Header.Get("Cache-Control"))
	}
	res, body = gw.do(http.MethodGet, "/node/"+wkTarget+"/", nav)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "wakegate demo home") {
		t.Fatalf("navigation to the awake home: %d %s", res.StatusCode, body)
	}
	if c := strings.Count(gw.logs.String(), `msg="exec: started home"`); c != 1 {
		t.Fatalf("exec started %d homes, want 1", c)
	}
}

// Check 7: no-wake user agents and paths leave a sleeping home asleep and
// are forwarded once it is awake.
func TestWakeE2ENoWakeRules(t *testing.T) {
	gw := wkStart(t, wkOptions{})
	robot := map[string]string{"User-Agent": "UptimeRobot/2.0"}
	favicon := "/node/" + wkTarget + "/favicon.ico"
	for _, c := range []struct {
		path string
		hdr  map[string]string
	}{{wkWhoami, robot}, {favicon, nil}} {
		res, body := gw.do(http.MethodGet, c.path, c.hdr)
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("X-Wakegate-Home") != "sleeping" {
			t.Fatalf("%s %v on a sleeping home: %d %q %s", c.path, c.hdr, res.StatusCode, res.Header.Get("X-Wakegate-Home"), body)
		}
	}
	if pids := testbin.HomePIDs(t, gw.homeDir()); len(pids) != 0 {
		t.Fatalf("a no-wake request started the home: %v", pids)
	}
	if strings.Contains(gw.logs.String(), "exec: started home") {
		t.Fatal("a no-wake request started the home")
	}
	gw.mustOK(wkWhoami, nil)
	ep := wkEndpoint(t, gw.logs.String())
	res, body := gw.do(http.MethodGet, wkWhoami, robot)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "UptimeRobot/2.0") {
		t.Fatalf("monitor on an awake home: %d %s", res.StatusCode, body)
	}
	res, _ = gw.do(http.MethodGet, favicon, nil)
	if res.StatusCode != http.StatusNotFound || res.Header.Get("X-Wakegate-Home") != "" {
		t.Fatalf("favicon on an awake home: %d %q, want the home's 404", res.StatusCode, res.Header.Get("X-Wakegate-Home"))
	}
	if got := wkStats(t, ep).Paths[favicon]; got != 1 {
		t.Fatalf("the home saw %d favicon requests, want 1", got)
	}
}

// Check 8: a restarted gateway adopts the running home.
func TestWakeE2ERestartAdoptsHome(t *testing.T) {
	dir := t.TempDir()
	cfg := wkConfig(t, wkOptions{keepRunning: true})
	homeDir := filepath.Join(dir, "data", "homes", wkHome)
	p := testbin.ServeIn(t, dir, cfg)
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := wkSend(c, http.MethodGet, "http://"+p.Addr+wkWhoami, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("first gateway: %v %s", err, body)
	}
	pid := wkOnePID(t, homeDir)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Wait(30 * time.Second); !ok {
		t.Fatal("gateway did not stop on SIGTERM")
	}
	if got := wkOnePID(t, homeDir); got != pid {
		t.Fatalf("home process %d after gateway stop, want %d still running", got, pid)
	}
	p2 := testbin.ServeIn(t, dir, cfg)
	if res, body, err := wkSend(c, http.MethodGet, "http://"+p2.Addr+wkWhoami, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("restarted gateway: %v %s", err, body)
	}
	if got := testbin.HomePIDs(t, homeDir); len(got) != 1 || got[0] != pid {
		t.Fatalf("home processes %v after restart, want only %d", got, pid)
	}
	out := p2.Output()
	if strings.Contains(out, "exec: started home") || !strings.Contains(out, "exec: adopted running home") {
		t.Fatalf("restarted gateway did not adopt the home:\n%s", out)
	}
}

// Check 9: a recorded pid that now names another process is never
// signalled; a fresh home answers.
func TestWakeE2EReusedPidNotSignalled(t *testing.T) {
	dir := t.TempDir()
	cfg := wkConfig(t, wkOptions{keepRunning: true})
	homeDir := filepath.Join(dir, "data", "homes", wkHome)
	p := testbin.ServeIn(t, dir, cfg)
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := wkSend(c, http.MethodGet, "http://"+p.Addr+wkWhoami, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("first gateway: %v %s", err, body)
	}
	old := wkOnePID(t, homeDir)
	p.Stop()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the killed home is gone", func() bool { return len(testbin.HomePIDs(t, homeDir)) == 0 })

	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
	})
	spid := sleeper.Process.Pid

	store, err := bolt.Open(filepath.Join(dir, "data", "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, err := store.GetHome(ctx, wkHome)
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]any
	if err := json.Unmarshal([]byte(rec.ProviderRef), &ref); err != nil || ref["pid"] == nil {
		t.Fatalf("stored ref %q: %v", rec.ProviderRef, err)
	}
	ref["pid"] = spid
	b, _ := json.Marshal(ref)
	cond := registry.CondOf(rec)
	rec.ProviderRef = string(b)
	if _, err := store.PutHome(ctx, rec, cond); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	p2 := testbin.ServeIn(t, dir, cfg)
	if res, body, err := wkSend(c, http.MethodGet, "http://"+p2.Addr+wkWhoami, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("restarted gateway: %v %s", err, body)
	}
	if s := testbin.ProcState(spid); s == 0 || s == 'Z' {
		t.Fatalf("the process now holding the recorded pid %d was signalled (state %q)", spid, s)
	}
	if pid := wkOnePID(t, homeDir); pid == spid || pid == old {
		t.Fatalf("home answered by pid %d; want a fresh process", pid)
	}
	out := p2.Output()
	if !strings.Contains(out, "exec: started home") || !strings.Contains(out, "recorded process identity does not match") {
		t.Fatalf("the restarted gateway did not refuse the recorded identity and start a fresh home:\n%s", out)
	}
}

// Check 10: POST /_wakegate/ready with the relay token reaches the wake
// (its next probe attempt runs at once) but never passes a probe on its
// own: a home that signals ready while its probe path answers 404 is not
// ready. A wrong token is refused.
func TestWakeE2EReadySignal(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("relay-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := wkStart(t, wkOptions{
		args: []string{"--relay-token", "relay-secret", "--notify-ready", "http://%ADDR%/_wakegate/ready"},
		wake: map[string]any{"probe": map[string]any{"kind": "http", "path": "/node/{target}/never-ready"}, "ready_timeout": "2s"},
		home: map[string]any{"relay_token": "file:" + tokenFile},
	})
	for _, hdr := range []map[string]string{{"X-Wakegate-Relay": "wrong"}, nil} {
		res, body := gw.do(http.MethodPost, "/_wakegate/ready", hdr)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("ready signal with %v: %d %s, want 401", hdr, res.StatusCode, body)
		}
	}
	res, body := gw.do(http.MethodGet, wkWhoami, nil)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "wake_timeout") {
		t.Fatalf("GET %s of a home that signals ready but answers 404: %d %s, want 503 wake_timeout", wkWhoami, res.StatusCode, body)
	}
	var lines []string
	testbin.Eventually(t, "the wake's log line", func() bool { lines = gw.logs.Lines("wake"); return len(lines) > 0 })
	if f := wkFields(lines[0]); f["outcome"] != "failed" || f["ready_signal"] != "true" {
		t.Fatalf("wake lines: %q, want a failed wake that received the ready signal", lines)
	}
	if gw.g.Engine().Warm(wkHome) {
		t.Fatal("a ready signal alone gave the home a warm verdict")
	}
}

// Check 11: idle suspends racing requests lose none of them.
func TestWakeE2EIdleSuspendRace(t *testing.T) {
	gw := wkStart(t, wkOptions{boot: "50ms", wake: map[string]any{"idle_timeout": "100ms"}})
	gaps := []time.Duration{10, 60, 90, 100, 110, 140, 200, 30}
	// At least 2s and 10 requests, and on until a suspend happened (the
	// idle loop's checks come late on a busy machine), for at most 20s.
	end, limit := time.Now().Add(2*time.Second), time.Now().Add(20*time.Second)
	n := 0
	for i := 0; time.Now().Before(end) || n < 10 || (len(gw.logs.Lines("suspend")) == 0 && time.Now().Before(limit)); i++ {
		gw.mustOK(wkWhoami, nil)
		n++
		time.Sleep(gaps[i%len(gaps)] * time.Millisecond)
	}
	if len(gw.logs.Lines("suspend")) == 0 {
		t.Fatalf("no idle suspend happened during %d requests; the race was not exercised", n)
	}
}
