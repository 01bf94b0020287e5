package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// asGateway is a gateway started by asStart: its public and admin
// addresses and its stop.
type asGateway struct {
	addr, admin string
	stop        func()
}

// asStart starts a real gateway from the config text, with an admin
// listener that accepts admToken, and returns it; stop ends it (and runs
// at the end of the test if not called before).
func asStart(t *testing.T, text string) *asGateway {
	t.Helper()
	cfg, err := all.Load("appstate.yaml", []byte(admConfig(text, "")))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		g.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}
	t.Cleanup(stop)
	actx, acancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer acancel()
	a, err := g.AdminAddr(actx)
	if err != nil {
		t.Fatalf("admin listener: %v", err)
	}
	return &asGateway{addr: ln.Addr().String(), admin: "http://" + a.String(), stop: stop}
}

// post sends an admin POST and returns its status and body.
func (g *asGateway) post(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admToken)
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("POST %s: read: %v", path, err)
	}
	return res.StatusCode, string(body)
}

// asUpstream is an app's upstream that answers "up" to everything.
func asUpstream(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up")) }))
	t.Cleanup(up.Close)
	return up.URL
}

// asAppPhase is the status and the X-Wakegate-App-Phase header of a
// public GET of url.
func asAppPhase(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, _ := e2eGet(t, c, url, nil)
	return res.StatusCode, res.Header.Get("X-Wakegate-App-Phase")
}

// TestAppStopSurvivesRestart: an app an operator stopped stays stopped
// after the gateway restarts on the same store, and one they started
// again stays running.
func TestAppStopSurvivesRestart(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	text := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\napps:\n  - slug: web\n    upstream: %s\n", data, asUpstream(t))
	c := e2eClient(t)

	gw := asStart(t, text)
	if code, body := gw.post(t, c, "/admin/apps/web/start?wait=30s"); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	if code, body := gw.post(t, c, "/admin/apps/web/stop?wait=30s"); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	gw.stop()

	gw = asStart(t, text)
	public := "http://" + gw.addr + "/apps/web/"
	if code, phase := asAppPhase(t, c, public); code != http.StatusServiceUnavailable || phase != "stopped" {
		t.Fatalf("after a restart the stopped app answers %d (phase %q), want 503 stopped", code, phase)
	}
	if code, body := gw.post(t, c, "/admin/apps/web/start?wait=30s"); code != http.StatusOK {
		t.Fatalf("start again: %d %s", code, body)
	}
	gw.stop()

	gw = asStart(t, text)
	public = "http://" + gw.addr + "/apps/web/"
	testbin.Eventually(t, "the started app serves after a restart", func() bool {
		code, _ := asAppPhase(t, c, public)
		return code == http.StatusOK
	})
}

// TestAppStopHoldsFleetWide: two gateways share one real Redis; an app
// stopped through one of them stops being served by the other.
func TestAppStopHoldsFleetWide(t *testing.T) {
	t.Parallel()
	srv := registrytest.StartRedis(t)
	up := asUpstream(t)
	conf := func(instance string) string {
		return fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\ninstance: %s\nredis:\n  url: %q\n  prefix: appstate\napps:\n  - slug: web\n    upstream: %s\n",
			filepath.Join(t.TempDir(), "data"), instance, srv.URL(), up)
	}
	a, b := asStart(t, conf("gw-a")), asStart(t, conf("gw-b"))
	c := e2eClient(t)
	publicB := "http://" + b.addr + "/apps/web/"
	testbin.Eventually(t, "gateway B serves the app", func() bool {
		code, _ := asAppPhase(t, c, publicB)
		return code == http.StatusOK
	})
	if code, body := a.post(t, c, "/admin/apps/web/stop?wait=30s"); code != http.StatusOK {
		t.Fatalf("stop on A: %d %s", code, body)
	}
	testbin.Eventually(t, "gateway B answers 503 stopped for the app stopped on A", func() bool {
		code, phase := asAppPhase(t, c, publicB)
		return code == http.StatusServiceUnavailable && phase == "stopped"
	})
}
