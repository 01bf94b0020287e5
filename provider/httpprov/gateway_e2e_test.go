package httpprov

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// The real gateway runs a home of provider http through the reference
// control plane, which runs the home as a real demo-home process: callers
// of a cold home cause one signed wake, the gateway probes and forwards to
// the endpoint the control plane gave, an idle home is stopped through
// the control plane (it cannot suspend), and the next caller wakes it
// again.
func TestGatewayThroughControlPlane(t *testing.T) {
	bin := testbin.Build(t)
	base, cpLog := referenceControlPlane(t, bin+" demo-home --addr 127.0.0.1:{port} --target {target} --version {version}")
	gw := testbin.ServeEnv(t, t.TempDir(), []string{"WAKEGATE_HTTP_SECRET=" + string(testSecret)}, fmt.Sprintf(`
listen: %%ADDR%%
data_dir: %%DATA%%
wake:
  ready_timeout: 20s
  idle_timeout: 1s
providers:
  http:
    base_url: %s
    secret: env:WAKEGATE_HTTP_SECRET
    poll_interval: 100ms
homes:
  - id: alice
    provider: http
    options: {size: small}
`, base))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	who := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.Addr+"/node/alice/whoami", nil)
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Accept", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("GET /node/alice/whoami = %d (%v), want 200 JSON from the home", res.StatusCode, err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); who() }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := cpLog.count("POST /homes/alice/wake "); n != 1 {
		t.Fatalf("the control plane got %d wakes for four callers of a cold home, want 1", n)
	}

	p := newClient(t, base, nil)
	testbin.Eventually(t, "the idle home stopped through the control plane", func() bool {
		st, err := p.Status(context.Background(), provider.Spec{ID: "alice", Target: "alice"})
		return err == nil && st.State == provider.StateStopped
	})
	if n := cpLog.count("POST /homes/alice/suspend "); n == 0 {
		t.Fatal("the gateway stopped the idle home without asking to suspend it first")
	}
	who()
	if n := cpLog.count("POST /homes/alice/wake "); n != 2 {
		t.Fatalf("the control plane got %d wakes, want 2 (the cold start and the wake after the stop)", n)
	}
}

// A control plane's refusal reaches the gateway's caller: its Retry-After
// becomes the caller's, and the public answer names no internal detail.
func TestGatewayRetryAfter(t *testing.T) {
	cp := newControlPlane(t)
	cp.refuse, cp.refuseSt = &Answer{Code: provider.ReasonCapacity, Reason: "no free hosts in rack 7", RetryAfter: 30}, http.StatusServiceUnavailable
	gw := testbin.ServeEnv(t, t.TempDir(), []string{"WAKEGATE_HTTP_SECRET=" + string(testSecret)}, fmt.Sprintf(`
listen: %%ADDR%%
data_dir: %%DATA%%
providers:
  http:
    base_url: %s
    secret: env:WAKEGATE_HTTP_SECRET
homes:
  - id: alice
    provider: http
`, cp.base))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.Addr+"/node/alice/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "30" {
		t.Fatalf("answer %d, Retry-After %q, want 503 with the control plane's 30", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if bytes.Contains(body, []byte("rack 7")) || bytes.Contains(body, []byte("127.0.0.1")) {
		t.Fatalf("public body %s carries the control plane's internals", body)
	}
	testbin.Eventually(t, "the refusal in the gateway's log", func() bool {
		return strings.Contains(gw.Output(), "no free hosts in rack 7")
	})
}

// A home behind the control plane rolls onto the target at its next wake:
// the control plane recreates it on the target's version and image, the
// gateway asserts the version it reports, and the home serves it.
func TestGatewayRoll(t *testing.T) {
	bin := testbin.Build(t)
	base, cpLog := referenceControlPlane(t, bin+" demo-home --addr 127.0.0.1:{port} --target {target} --version {version}")
	gw := testbin.ServeEnv(t, t.TempDir(), []string{"WAKEGATE_HTTP_SECRET=" + string(testSecret)}, fmt.Sprintf(`
listen: %%ADDR%%
data_dir: %%DATA%%
wake:
  ready_timeout: 20s
roll:
  mode: lazy
  target: {version: "2", image: "registry.example/app:2"}
providers:
  http:
    base_url: %s
    secret: env:WAKEGATE_HTTP_SECRET
    poll_interval: 100ms
homes:
  - id: alice
    provider: http
    version: "1"
`, base))
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, res, err := d.Dial("ws://"+gw.Addr+"/node/alice/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	defer conn.Close()
	res.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var hello struct{ Version string }
	if err := conn.ReadJSON(&hello); err != nil || hello.Version != "2" {
		t.Fatalf("the home says %+v (%v), want version 2", hello, err)
	}
	if n := cpLog.count("POST /homes/alice/recreate "); n != 1 {
		t.Fatalf("the control plane got %d recreates, want 1", n)
	}
}
