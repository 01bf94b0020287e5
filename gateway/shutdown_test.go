package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
)

const e2eShutdownConfig = `
listen: "%ADDR%"
data_dir: "%DATA%"
server:
  drain_grace: 2s
wake:
  idle_timeout: 0s
homes:
  - id: demo
apps:
  - slug: demo
    upstream: "http://%HOME%/apps/demo"
    strip_prefix: true
`

// TestShutdownDrains sends SIGTERM to a real gateway with an open
// WebSocket (to an exec home) and a slow request (to an app) in flight: the
// WebSocket gets a close frame with 1001 when the drain starts, the request
// finishes with 200, and the process exits 0 with nothing cut.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	home := e2eDemoHome(t)
	gw := testbin.Serve(t, strings.ReplaceAll(e2eShutdownConfig, "%HOME%", home))
	base := "http://" + gw.Addr
	c := e2eClient(t)

	conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.Addr+"/node/demo/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	e2eHello(t, conn, "demo")

	type result struct {
		status int
		body   string
		err    error
	}
	slow := make(chan result, 1)
	go func() {
		res, err := c.Get(base + "/apps/demo/slow?d=1s")
		if err != nil {
			slow <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		slow <- result{status: res.StatusCode, body: string(b), err: err}
	}()
	// The home counts a request when it arrives: from then on the request
	// is in flight through the gateway.
	testbin.Eventually(t, "the slow request to reach the home", func() bool {
		res, err := http.Get("http://" + home + "/_demo/stats")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var st struct{ Paths map[string]int64 }
		return json.NewDecoder(res.Body).Decode(&st) == nil && st.Paths["/apps/demo/slow"] == 1
	})

	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	select {
	case r := <-slow:
		if r.err != nil || r.status != http.StatusOK || r.body != "slow done" {
			t.Errorf("slow request during the drain: %d %q %v; want 200 slow done", r.status, r.body, r.err)
		}
	case <-time.After(testbin.WaitLimit):
		t.Fatal("slow request did not finish")
	}

	// The WebSocket was told to go away when the drain started.
	_ = conn.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
	if _, _, err = conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("WebSocket read during the drain: %v; want a close frame with 1001", err)
	}

	exitErr, exited := gw.Wait(grace + 5*time.Second)
	if !exited {
		t.Fatalf("gateway still running %s after the grace", 5*time.Second)
	}
	if exitErr != nil {
		t.Errorf("gateway exit: %v, want 0", exitErr)
	}
	out := gw.Output()
	for _, want := range []string{"shutting down", "websockets_going_away=1", "requests_cut=0 websockets_cut=0", "msg=stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// TestShutdownReadyz cancels an in-process gateway's context while a
// WebSocket holds the drain open (drain_websockets: end): /readyz answers
// 503, new connections are refused, the open WebSocket keeps working, and
// Serve returns nil once it closes.
func TestShutdownReadyz(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
server:
  drain_grace: 30s
  drain_websockets: end
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		gw.g.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := readyz(); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz before shutdown: %d %q", code, body)
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws://"+gw.addr+"/node/demo/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	e2eHello(t, conn, "demo")

	gw.cancel()
	testbin.Eventually(t, "/readyz 503", func() bool {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && body == "draining\n"
	})
	testbin.Eventually(t, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", gw.addr, time.Second)
		if err != nil {
			return errors.Is(err, syscall.ECONNREFUSED)
		}
		c.Close()
		return false
	})

	// The drain waits for the WebSocket (the grace is far away).
	e2eEcho(t, conn, websocket.TextMessage, []byte("still here while draining"))
	select {
	case <-gw.served:
		t.Fatalf("Serve returned (%v) with a WebSocket open inside the grace", gw.err)
	default:
	}

	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	select {
	case <-gw.served:
		if gw.err != nil {
			t.Errorf("Serve: %v", gw.err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after the last WebSocket closed")
	}
	if n := gw.g.Sessions().Count("demo"); n != 0 {
		t.Errorf("sessions after the drain: %d", n)
	}
}

// With drain_delay, a load balancer polling /readyz over the network sees
// 503 before the listener closes.
func TestShutdownDrainDelay(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
server:
  drain_delay: 3s
  drain_grace: 1s
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	get := func() (int, string, error) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		res, err := c.Get("http://" + gw.addr + "/readyz")
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), nil
	}
	if code, _, err := get(); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz before shutdown: %d, %v", code, err)
	}
	gw.cancel()
	testbin.Eventually(t, "/readyz 503 on a new connection during the drain delay", func() bool {
		code, body, err := get()
		return err == nil && code == http.StatusServiceUnavailable && body == "draining\n"
	})
	select {
	case <-gw.served:
		t.Fatalf("Serve returned (%v) inside the drain delay", gw.err)
	default:
	}
}

// shutdownRecordedPID reads the pid the exec provider recorded for the
// home whose directory is homeDir (its home.ref).
// homeFile is the path of the provider's file name (home.log, home.ref)
// of exec home id under data_dir data: in data/exec/<id> when homes have
// users of their own (data/exec exists), else in the home's folder.
func homeFile(data, id, name string) string {
	if st, err := os.Stat(filepath.Join(data, "exec")); err == nil && st.IsDir() {
		return filepath.Join(data, "exec", id, name)
	}
	return filepath.Join(data, "homes", id, name)
}

func shutdownRecordedPID(t *testing.T, homeDir string) int {
	t.Helper()
	b, err := os.ReadFile(homeFile(filepath.Dir(filepath.Dir(homeDir)), filepath.Base(homeDir), "home.ref"))
	if err != nil {
		t.Fatalf("recorded process: %v", err)
	}
	var ref struct{ PID int }
	if err := json.Unmarshal(b, &ref); err != nil || ref.PID <= 0 {
		t.Fatalf("recorded process %q: %v", b, err)
	}
	return ref.PID
}

// TestShutdownQuiescesHomes interrupts a real gateway (SIGINT, as Ctrl-C
// on `go run . serve` does) after it woke a demo home, then starts a second
// gateway on the same data. By default the recorded home process is gone
// when the gateway has exited, and the next start, which finds the home's
// desired state kept, wakes a new process. With
// exec.keep_running_on_shutdown the process survives and the next start
// adopts it.
func TestShutdownQuiescesHomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		keep bool
	}{{"default stops the homes", false}, {"keep_running_on_shutdown adopts them", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := "listen: \"%ADDR%\"\ndata_dir: \"%DATA%\"\nlog:\n  access: false\nwake:\n  idle_timeout: 0s\nhomes:\n  - id: demo\n"
			if tc.keep {
				cfg += "exec:\n  keep_running_on_shutdown: true\n"
			}
			dir := t.TempDir()
			homeDir := filepath.Join(dir, "data", "homes", "demo")
			c := e2eClient(t)
			gw := testbin.ServeIn(t, dir, cfg)
			if res, body := e2eGet(t, c, "http://"+gw.Addr+"/node/demo/whoami", nil); res.StatusCode != http.StatusOK {
				t.Fatalf("first gateway: %d %s", res.StatusCode, body)
			}
			pid := shutdownRecordedPID(t, homeDir)
			if s := testbin.ProcState(pid); s == 0 || s == 'Z' {
				t.Fatalf("recorded home process %d not running (state %q)", pid, s)
			}

			if err := gw.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if exitErr, ok := gw.Wait(testbin.WaitLimit); !ok || exitErr != nil {
				t.Fatalf("gateway after SIGINT: exited %v, err %v\n%s", ok, exitErr, gw.Output())
			}
			alive := testbin.ProcState(pid) != 0 && testbin.ProcState(pid) != 'Z'
			if alive != tc.keep {
				t.Fatalf("home process %d alive after the gateway exited: %v, want %v\n%s", pid, alive, tc.keep, gw.Output())
			}

			// The desired state was kept: the second gateway brings the home
			// back at start, before any request asks for it.
			gw2 := testbin.ServeIn(t, dir, cfg)
			testbin.Eventually(t, "the home running again after the restart", func() bool {
				return len(testbin.HomePIDs(t, homeDir)) == 1
			})
			if res, body := e2eGet(t, c, "http://"+gw2.Addr+"/node/demo/whoami", nil); res.StatusCode != http.StatusOK {
				t.Fatalf("second gateway: %d %s", res.StatusCode, body)
			}
			pids := testbin.HomePIDs(t, homeDir)
			out := gw2.Output()
			switch {
			case len(pids) != 1:
				t.Fatalf("home processes %v after the restart, want one", pids)
			case tc.keep && (pids[0] != pid || !strings.Contains(out, "exec: adopted running home")):
				t.Fatalf("home process %v after the restart, want %d adopted\n%s", pids, pid, out)
			case !tc.keep && (pids[0] == pid || !strings.Contains(out, "exec: started home")):
				t.Fatalf("home process %v after the restart, want a new one\n%s", pids, out)
			}
		})
	}
}

// shutdownSlowGet runs GET url in the background and reports its result.
func shutdownSlowGet(c *http.Client, url string) <-chan shutdownResult {
	out := make(chan shutdownResult, 1)
	go func() {
		res, err := c.Get(url)
		if err != nil {
			out <- shutdownResult{err: err, at: time.Now()}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		out <- shutdownResult{status: res.StatusCode, body: string(b), err: err, at: time.Now()}
	}()
	return out
}

type shutdownResult struct {
	status int
	body   string
	err    error
	at     time.Time
}

// shutdownOpenWS opens n WebSockets to the demo home through the gateway
// and reads each one's hello.
func shutdownOpenWS(t *testing.T, addr string, n int) []*websocket.Conn {
	t.Helper()
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/node/demo/ws", nil)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		e2eHello(t, c, "demo")
		conns[i] = c
	}
	return conns
}

// TestShutdownWebSocketsGoAway shuts down a gateway relaying 200
// WebSockets to a real WebSocket home while a 2 s request is in flight,
// with a drain grace far away: every client gets a close frame with 1001
// before the request finishes (the close frames go out when the drain
// starts), the request finishes with 200, and Serve returns without
// waiting for the grace, with nothing cut.
func TestShutdownWebSocketsGoAway(t *testing.T) {
	t.Parallel()
	const n = 200
	gw := e2eStartInProcess(t, `
log: {access: false}
server:
  drain_grace: 10m
  max_conns_per_client: 1000
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	conns := shutdownOpenWS(t, gw.addr, n)
	slow := shutdownSlowGet(e2eClient(t), "http://"+gw.addr+"/node/demo/slow?d=2s")
	testbin.Eventually(t, "the slow request counted as a session", func() bool {
		return gw.g.Sessions().Count("demo") == n+1
	})

	start := time.Now()
	gw.cancel()
	var lastClose time.Time
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		_, _, err := c.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("WebSocket %d: %v, want a close frame with 1001", i, err)
		}
		lastClose = time.Now()
	}
	var r shutdownResult
	select {
	case r = <-slow:
	case <-time.After(testbin.WaitLimit):
		t.Fatal("the slow request did not finish")
	}
	if r.err != nil || r.status != http.StatusOK || r.body != "slow done" {
		t.Errorf("slow request during the drain: %d %q %v; want 200 slow done", r.status, r.body, r.err)
	}
	if !lastClose.Before(r.at) {
		t.Errorf("the last close frame came %s after shutdown began, not before the slow request ended (%s)",
			lastClose.Sub(start), r.at.Sub(start))
	}
	select {
	case <-gw.served:
	case <-time.After(testbin.WaitLimit):
		t.Fatal("Serve did not return once the slow request had finished")
	}
	served := time.Now()
	t.Logf("shutdown with %d WebSockets: all close frames after %s, slow request (2s) done after %s, Serve returned after %s",
		n, lastClose.Sub(start), r.at.Sub(start), served.Sub(start))
	logs := gw.logs.String()
	if strings.Contains(logs, "drain grace over") {
		t.Errorf("the drain waited for its grace:\n%s", logs)
	}
	if !strings.Contains(logs, "websockets_going_away="+strconv.Itoa(n)) || !strings.Contains(logs, "requests_cut=0 websockets_cut=0") {
		t.Errorf("log lacks the going-away and cut counts:\n%s", logs)
	}
}

// TestShutdownCutsAtGraceEnd keeps WebSockets open through the grace
// (drain_websockets: end) with a request that outlasts it: when the grace
// is over the WebSocket gets a close frame with 1001, the request is
// answered 503 shutting_down, and the log counts one request cut.
func TestShutdownCutsAtGraceEnd(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
log: {access: false}
server:
  drain_grace: 1s
  drain_websockets: end
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	conns := shutdownOpenWS(t, gw.addr, 1)
	long := shutdownSlowGet(e2eClient(t), "http://"+gw.addr+"/node/demo/slow?d=1m")
	testbin.Eventually(t, "the long request counted as a session", func() bool {
		return gw.g.Sessions().Count("demo") == 2
	})
	gw.cancel()
	// Inside the grace the WebSocket still works.
	e2eEcho(t, conns[0], websocket.TextMessage, []byte("still here while draining"))
	_ = conns[0].SetReadDeadline(time.Now().Add(testbin.WaitLimit))
	if _, _, err := conns[0].ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("WebSocket at the grace's end: %v, want a close frame with 1001", err)
	}
	select {
	case r := <-long:
		if r.err != nil || r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"shutting_down"`) {
			t.Errorf("request cut at the grace's end: %d %q %v; want 503 shutting_down", r.status, r.body, r.err)
		}
	case <-time.After(testbin.WaitLimit):
		t.Fatal("the long request was not answered")
	}
	select {
	case <-gw.served:
	case <-time.After(testbin.WaitLimit):
		t.Fatal("Serve did not return")
	}
	logs := gw.logs.String()
	if !strings.Contains(logs, "requests_cut=1 websockets_cut=0") {
		t.Errorf("log lacks the cut counts:\n%s", logs)
	}
}
