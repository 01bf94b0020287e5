package faultinject

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// A fleet store that does not answer (redis-server paused: its
// connections stay open, nothing comes back) is seen by readiness and the
// admin plane within a bound (issue 47, finding 4): /readyz answers 503
// "degraded: store unreachable", /admin/status answers with the cause.
func TestFleetStorePausedIsSeen(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 1, fiOptions{admin: true})
	g := gws[0]
	srv.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
	paused := time.Now()
	c := &http.Client{Timeout: 10 * time.Second}
	var code int
	var body string
	testbin.Poll(15*time.Second, 100*time.Millisecond, func() bool {
		res, err := c.Get(g.url + "/readyz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		code, body = res.StatusCode, string(b)
		return code == http.StatusServiceUnavailable
	})
	seen := time.Since(paused)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "degraded: store unreachable") {
		t.Fatalf("/readyz with the store paused for %s: %d %q, want 503 degraded: store unreachable", seen.Round(time.Millisecond), code, body)
	}
	st, sbody := g.adminDo(t, http.MethodGet, "/admin/status")
	if st != http.StatusOK || !strings.Contains(sbody, "does not answer") {
		t.Fatalf("/admin/status with the store paused: %d %s, want 200 naming the cause", st, sbody)
	}
	srv.Signal(syscall.SIGCONT)
	testbin.Eventually(t, "/readyz ready again", func() bool {
		res, err := c.Get(g.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	t.Logf("store paused: /readyz 503 after %s; /admin/status 200 with the cause; ready again once it answers", seen.Round(time.Millisecond))
}
