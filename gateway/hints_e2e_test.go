package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/internal/testbin"
)

// hintPython runs a real `python3 -m http.server` serving an empty
// folder on a free loopback port and returns its base URL.
func hintPython(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	port := testbin.FreePort(t)
	cmd := exec.Command("python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", t.TempDir(), fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// TestHintStripPrefix: an app without strip_prefix is checked where the
// gateway forwards it, under /apps/py/; a Python server that serves at its
// root answers that with 404, and / with 200, so the app is failed/unhealthy
// with a hint that names strip_prefix, in its status and in a warning log
// line; the public answer does not carry the hint.
func TestHintStripPrefix(t *testing.T) {
	t.Parallel()
	py := hintPython(t)
	gw := e2eStartWithCommand(t, `["true"]`, fmt.Sprintf(`
apps:
  - slug: py
    upstream: %s
    health: {interval: 1h, timeout: 2s}
`, py))
	var st appstatus.Status
	testbin.Eventually(t, "the app's health check to get 404 under its prefix", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, _ = gw.g.Apps().Refresh(ctx, "py", "")
		return st.Reason == appstatus.ReasonUnhealthy
	})
	if !strings.Contains(st.Message, "GET /apps/py/") || !strings.Contains(st.Message, "404") ||
		!strings.Contains(st.Hint, "strip_prefix: true") || !strings.Contains(st.Hint, "at its root") {
		t.Fatalf("status %q, hint %q: want the 404 under /apps/py/ and a hint that names strip_prefix", st.Message, st.Hint)
	}
	testbin.Eventually(t, "a warning that carries the hint", func() bool {
		for _, l := range gw.logs.Lines(`"app phase"`) {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "strip_prefix: true") {
				return true
			}
		}
		return false
	})
	res, err := http.Get("http://" + gw.addr + "/apps/py/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), "strip_prefix") {
		t.Fatalf("public answer %d %q: want 503 without the hint", res.StatusCode, body)
	}
}

// TestHintAutoProbeNotFound: a home that answers 404 under /node/{target}
// fails its wake with a hint, in the wake's log line and in its wake
// history, that names the kept prefix and strip_prefix.
func TestHintAutoProbeNotFound(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	gw := e2eStartWithCommand(t, `["`+testbin.Python(t)+`", "-m", "http.server", "--bind", "127.0.0.1", "{port}"]`, `
wake:
  ready_timeout: 20s
homes:
  - id: py
`)
	res, err := http.Get("http://" + gw.addr + "/node/py/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), "strip_prefix") {
		t.Fatalf("public answer %d %q: want 503 without the hint", res.StatusCode, body)
	}
	testbin.Eventually(t, "the failed wake in the history", func() bool {
		h := gw.g.Engine().WakeHistory("py")
		return len(h) > 0 && h[0].Outcome == "failed"
	})
	r := gw.g.Engine().WakeHistory("py")[0]
	if !strings.Contains(r.Hint, "strip_prefix: true") || !strings.Contains(r.Error, "status 404") {
		t.Fatalf("wake record error %q hint %q: want the 404s and the strip_prefix hint", r.Error, r.Hint)
	}
	// The wake's history is written before its log line.
	testbin.Eventually(t, "a failed wake line with the hint in the log", func() bool {
		for _, l := range gw.logs.Lines("wake") {
			if strings.Contains(l, "outcome=failed") && strings.Contains(l, "strip_prefix: true") {
				return true
			}
		}
		return false
	})
}
