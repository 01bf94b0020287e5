package gateway_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/wakerecord"
)

// routesDemoHome runs a demo home for target on addr, outside any
// gateway's supervision, and waits until it answers.
func routesDemoHome(t *testing.T, addr, target string) *testbin.Proc {
	t.Helper()
	p := testbin.Start(t, t.TempDir(), nil, "demo-home", "--addr", addr, "--target", target)
	testbin.Eventually(t, "demo home on "+addr, func() bool {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}

// routesWakeStarts counts the wake.start events of home id.
func routesWakeStarts(gw *e2eGateway, id string) int {
	n := 0
	for _, ev := range gw.g.Engine().Events().Recent() {
		if ev.Type == events.WakeStart && ev.Home == id {
			n++
		}
	}
	return n
}

// TestRoutesFailedForwardDropsVerdict kills a real home under a warm
// verdict and sends it a POST with a body, which cannot be replayed: the
// caller gets a 502 that names no address, the verdict is gone, and the
// next request goes through a wake (its probe) again instead of trusting it.
func TestRoutesFailedForwardDropsVerdict(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	home := routesDemoHome(t, addr, "st")
	gw := e2eStartInProcess(t, fmt.Sprintf(`
wake:
  warm_ttl: 10m
  idle_timeout: 0s
  ready_timeout: 5s
homes:
  - id: st
    provider: static
    endpoint: "http://%s"
`, addr))
	c := e2eClient(t)
	base := "http://" + gw.addr + "/node/st"
	if res, body := e2eGet(t, c, base+"/whoami", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d %s", res.StatusCode, body)
	}
	if !gw.g.Engine().Warm("st") {
		t.Fatal("no warm verdict after a proven wake")
	}
	starts := routesWakeStarts(gw, "st")

	home.Stop()
	res, err := c.Post(base+"/echo", "text/plain", strings.NewReader("a body that cannot be sent twice"))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(res.Body).Decode(&body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || body.Error.Code != "upstream_unreachable" ||
		strings.Contains(body.Error.Message, "127.0.0.1") {
		t.Fatalf("POST to the killed home: %d %+v; want 502 upstream_unreachable naming no address", res.StatusCode, body)
	}
	if gw.g.Engine().Warm("st") {
		t.Fatal("the warm verdict survived a failed forward of a request that could not be replayed")
	}

	routesDemoHome(t, addr, "st")
	res, _ = e2eGet(t, c, base+"/whoami", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Server-Timing"), "wake;dur=") {
		t.Fatalf("next request: %d Server-Timing %q; want 200 after a wake", res.StatusCode, res.Header.Get("Server-Timing"))
	}
	if got := routesWakeStarts(gw, "st"); got != starts+1 {
		t.Fatalf("%d wakes started after the failed forward; want one", got-starts)
	}
}

// routesWakeStatus polls the waiting page's status URL of home target with
// user agent ua.
func routesWakeStatus(t *testing.T, gw *e2eGateway, target, ua string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+gw.addr+"/_wakegate/wake/node/"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", ua)
	res, err := e2eClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("status body: %v", err)
	}
	return res.StatusCode, out
}

const routesBrowser = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"

// TestRoutesWakeStatusStartsNoWake polls homes' wake status as a monitor
// and as a browser would: a poll never starts a wake. It reports a
// sleeping home asleep, a wake queued under the global cap of one, and a
// failed wake failed, with its public code and request id, however often
// it is polled.
func TestRoutesWakeStatusStartsNoWake(t *testing.T) {
	t.Parallel()
	dead := fmt.Sprintf("http://127.0.0.1:%d", testbin.FreePort(t))
	gw := e2eStartInProcess(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 2s
  hold: 0s
  failure_backoff: 10m
  max_concurrent: 1
homes:
  - id: demo
  - id: a
    provider: static
    endpoint: %q
  - id: b
    provider: static
    endpoint: %q
`, dead, dead))
	for _, ua := range []string{"UptimeRobot/2.0", routesBrowser} {
		code, out := routesWakeStatus(t, gw, "demo", ua)
		if code != http.StatusOK || out["phase"] != wakerecord.Asleep || out["ready"] != false {
			t.Fatalf("%s's poll of a sleeping home: %d %v; want 200 asleep", ua, code, out)
		}
	}
	if n := routesWakeStarts(gw, "demo"); n != 0 {
		t.Fatalf("polls started %d wakes", n)
	}

	// Navigations start a's and b's wakes (the waiting page at once); a
	// holds the only slot while it probes, and b's poll says queued.
	c := e2eClient(t)
	nav := http.Header{"Accept": {"text/html"}}
	for _, id := range []string{"a", "b"} {
		if id == "b" {
			testbin.Eventually(t, "a's wake to take the slot", func() bool {
				phase, _, ok := gw.g.Engine().Progress("a")
				return ok && phase != "queued"
			})
		}
		if res, body := e2eGet(t, c, "http://"+gw.addr+"/node/"+id+"/", nav); res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("navigation to %s: %d %s; want the waiting page", id, res.StatusCode, body)
		}
	}
	if code, out := routesWakeStatus(t, gw, "b", routesBrowser); code != http.StatusOK || out["phase"] != wakerecord.Queued {
		t.Fatalf("b's poll under the cap while a wakes: %d %v; want phase queued", code, out)
	}
	testbin.Eventually(t, "a's wake to fail", func() bool {
		_, out := routesWakeStatus(t, gw, "a", routesBrowser)
		return out["phase"] == wakerecord.Failed
	})
	starts := routesWakeStarts(gw, "a")
	for range 3 {
		code, out := routesWakeStatus(t, gw, "a", routesBrowser)
		if code != http.StatusOK || out["code"] != homefault.CodeWakeTimeout || out["ready"] != false ||
			out["error"] == "" || out["request_id"] == "" {
			t.Fatalf("a's poll after its failed wake: %d %v; want failed, wake_timeout, a request id", code, out)
		}
	}
	if got := routesWakeStarts(gw, "a"); got != starts || starts != 1 {
		t.Fatalf("a's wakes: %d before the polls, %d after; want 1 and no more", starts, got)
	}
}

// TestRoutesWakeStatusReadyTellsTheWait: once a home is ready, its status
// says how long the wake that made it ready took, as the gateway measured
// it, which the waiting page shows as the wait.
func TestRoutesWakeStatusReadyTellsTheWait(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	if _, out := routesWakeStatus(t, gw, "demo", routesBrowser); out["elapsed_ms"] != nil {
		t.Fatalf("a sleeping home's status carries elapsed_ms: %v", out)
	}
	t0 := time.Now()
	if res, body := e2eGet(t, e2eClient(t), "http://"+gw.addr+"/node/demo/whoami", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("wake: %d %s", res.StatusCode, body)
	}
	waited := time.Since(t0)
	code, out := routesWakeStatus(t, gw, "demo", routesBrowser)
	ms, _ := out["elapsed_ms"].(float64)
	if code != http.StatusOK || out["ready"] != true || ms <= 0 || ms > float64(waited.Milliseconds()) {
		t.Fatalf("status after the wake: %d %v; want ready with elapsed_ms in (0, %d]", code, out, waited.Milliseconds())
	}
}
