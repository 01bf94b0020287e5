package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry"
)

// rlGateway is an in-process gateway with one exec demo home, h1 at
// /node/alice on version "1", and the given roll section.
type rlGateway struct {
	t      *testing.T
	g      *gateway.Gateway
	addr   string
	logs   *testbin.LogBuffer
	client *http.Client
}

func rlStart(t *testing.T, roll map[string]any) *rlGateway {
	t.Helper()
	bin := testbin.Build(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	cfg := map[string]any{
		"listen": ln.Addr().String(), "data_dir": data, "instance": "rl",
		"log":    map[string]any{"format": "text", "level": "info", "access": false},
		"server": map[string]any{"drain_grace": "2s"},
		"wake": map[string]any{"warm_ttl": "1m", "ready_timeout": "10s", "wake_timeout": "20s",
			"idle_timeout": "0s", "retry_after": "1s"},
		"exec": map[string]any{"stop_grace": "2s", "command": []string{bin, "demo-home", "--addr", "127.0.0.1:{port}",
			"--target", "{target}", "--version", "{version}", "--boot-delay", "100ms"}},
		"homes": []any{map[string]any{"id": "h1", "target": "alice", "version": "1"}},
		"roll":  roll,
	}
	text, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := all.Load("roll.yaml", text)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), c, gateway.NewLogger(c.Log, logs))
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	gw := &rlGateway{t: t, g: g, addr: ln.Addr().String(), logs: logs,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 60 * time.Second}}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
		testbin.KillHomes(data)
		gw.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	return gw
}

var rlPageVersion = regexp.MustCompile(`version: <code>([^<]*)</code>`)

// version fetches the home's page through the gateway (an API-style GET,
// so it waits for the wake) and returns the version the page names.
func (gw *rlGateway) version() string {
	gw.t.Helper()
	v, err := rlFetchVersion(gw.client, gw.addr)
	if err != nil {
		gw.t.Fatal(err)
	}
	return v
}

func rlFetchVersion(c *http.Client, addr string) (string, error) {
	res, body, err := wkSend(c, http.MethodGet, "http://"+addr+"/node/alice/", nil)
	if err != nil {
		return "", err
	}
	m := rlPageVersion.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil {
		return "", &rlBadAnswer{res.StatusCode, body}
	}
	return m[1], nil
}

type rlBadAnswer struct {
	status int
	body   string
}

func (e *rlBadAnswer) Error() string {
	return "GET /node/alice/: " + http.StatusText(e.status) + ": " + e.body
}

// started counts the processes the exec provider started.
func (gw *rlGateway) started() int { return len(gw.logs.Lines(`"exec: started home"`)) }

func TestRollConfiguredTargetServesTheTriggeringRequest(t *testing.T) {
	gw := rlStart(t, map[string]any{"target": map[string]any{"version": "2"}})
	tg, err := gw.g.Engine().Target(context.Background())
	if err != nil || tg.Version != "2" {
		t.Fatalf("target from config: %+v, %v", tg, err)
	}
	// The first request meets the stale sleeping home: it is rolled, and
	// that same request is answered by version 2.
	if got := gw.version(); got != "2" {
		t.Fatalf("the triggering request was answered by version %q, want 2", got)
	}
	if n := gw.started(); n != 1 {
		t.Fatalf("%d processes started, want 1 (the rolled home)", n)
	}
	if st := gw.g.Engine().RollStats(); st.Rolled.Load() != 1 {
		t.Fatalf("rolled %d", st.Rolled.Load())
	}
}

func TestRollConcurrentRequestsMakeOneRoll(t *testing.T) {
	gw := rlStart(t, map[string]any{"target": map[string]any{"version": "2"}})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := rlFetchVersion(gw.client, gw.addr)
			if err != nil {
				errs <- err.Error()
			} else if v != "2" {
				errs <- "answered by version " + v
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a request failed: %s", e)
	}
	st := gw.g.Engine().RollStats()
	if st.Started.Load() != 1 || st.Rolled.Load() != 1 {
		t.Fatalf("rolls started %d, rolled %d; want exactly one", st.Started.Load(), st.Rolled.Load())
	}
	if got := gw.started(); got != 1 {
		t.Fatalf("%d processes started, want exactly 1", got)
	}
	if lines := gw.logs.Lines("roll"); len(lines) != 2 { // start and done
		t.Fatalf("roll log lines %q, want one start and one done", lines)
	}
}

// rlDial opens a WebSocket to the home through the gateway and returns it
// with the version its hello frame names.
func rlDial(t *testing.T, addr string) (*websocket.Conn, string) {
	t.Helper()
	conn, res, err := websocket.DefaultDialer.Dial("ws://"+addr+"/node/alice/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	res.Body.Close()
	var hello struct{ Version string }
	if err := conn.ReadJSON(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return conn, hello.Version
}

func rlEcho(t *testing.T, conn *websocket.Conn) {
	t.Helper()
	if err := conn.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), "still here") {
		t.Fatalf("echo: %q %v", msg, err)
	}
}

func TestRollOpenWebSocketDefersLazyRoll(t *testing.T) {
	gw := rlStart(t, nil) // lazy, no target yet
	conn, v := rlDial(t, gw.addr)
	defer conn.Close()
	if v != "1" {
		t.Fatalf("hello from version %q", v)
	}
	eng := gw.g.Engine()
	if _, err := eng.SetTarget(context.Background(), registry.Target{Version: "2"}); err != nil {
		t.Fatal(err)
	}
	// The next wake of the home (its verdict dropped) meets a user: it is
	// woken as it is, not rolled, and the socket lives on.
	eng.Drop("h1")
	if got := gw.version(); got != "1" {
		t.Fatalf("a home with an open WebSocket was rolled to %q", got)
	}
	rlEcho(t, conn)
	st := eng.RollStats()
	if st.Started.Load() != 0 || st.SkippedBusy.Load() != 1 {
		t.Fatalf("rolls started %d, skipped busy %d", st.Started.Load(), st.SkippedBusy.Load())
	}
	// Once the socket is closed, the next wake rolls.
	conn.Close()
	testbin.Eventually(t, "the socket's session to end", func() bool { return gw.g.Sessions().Count("h1") == 0 })
	eng.Drop("h1")
	if got := gw.version(); got != "2" {
		t.Fatalf("after the socket closed the home runs %q, want 2", got)
	}
}

func TestRollEagerRollsIdleHomeAfterSocketCloses(t *testing.T) {
	gw := rlStart(t, map[string]any{"mode": "eager", "idle_after": "100ms"})
	conn, v := rlDial(t, gw.addr)
	defer conn.Close()
	if v != "1" {
		t.Fatalf("hello from version %q", v)
	}
	eng := gw.g.Engine()
	if _, err := eng.SetTarget(context.Background(), registry.Target{Version: "2"}); err != nil {
		t.Fatal(err)
	}
	// Several idle_after periods (the loop ticks every 25ms: twenty rounds
	// of it) with the socket open: no roll.
	from := eng.Stats().IdleTicks
	testbin.Eventually(t, "twenty idle ticks", func() bool { return eng.Stats().IdleTicks >= from+20 })
	rlEcho(t, conn)
	if st := eng.RollStats(); st.Started.Load() != 0 {
		t.Fatalf("an eager roll started under an open WebSocket")
	}
	conn.Close()
	// With no request at all, the idle home rolls.
	testbin.Eventually(t, "an eager roll", func() bool { return eng.RollStats().Rolled.Load() == 1 })
	before := gw.started()
	if got := gw.version(); got != "2" {
		t.Fatalf("after the eager roll the home runs %q, want 2", got)
	}
	if gw.started() != before {
		t.Fatal("the request after an eager roll started another process")
	}
	var rolled []string
	for _, ev := range eng.Events().Recent() {
		if ev.Type == events.RollDone {
			b, _ := json.Marshal(ev)
			rolled = append(rolled, string(b))
		}
	}
	if len(rolled) != 1 || !strings.Contains(rolled[0], `"cause":"roll"`) {
		t.Fatalf("roll.done events %q", rolled)
	}
}
