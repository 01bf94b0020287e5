package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestSuspendDropsIdleUpstreamConns checks that a suspend closes the
// gateway's idle pooled connections to the home at once: the home closed
// its end, and they would otherwise sit half-closed (CLOSE-WAIT) until
// proxy.idle_conn_timeout.
func TestSuspendDropsIdleUpstreamConns(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
wake:
  idle_timeout: 2s
proxy:
  idle_conn_timeout: 5m
homes:
  - id: cw
    target: cw
`)
	client := e2eClient(t)
	// A few callers at once leave a few pooled connections behind.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := client.Get("http://" + gw.addr + "/node/cw/whoami")
			if err != nil {
				t.Error(err)
				return
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Errorf("whoami: %d", res.StatusCode)
			}
		}()
	}
	wg.Wait()
	dir := filepath.Join(gw.data, "homes", "cw")
	pids := testbin.HomePIDs(t, dir)
	if len(pids) == 0 {
		t.Fatal("the home does not run after its requests")
	}
	port := homePort(t, pids[0])
	if n := connsTo(port); n == 0 {
		t.Fatalf("no pooled connection to the home's port %d after its requests", port)
	}
	testbin.Eventually(t, "the idle home suspended", func() bool { return len(testbin.HomePIDs(t, dir)) == 0 })
	testbin.Eventually(t, "no connection left to the suspended home's port", func() bool { return connsTo(port) == 0 })
}

var listenAddr = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)

// homePort reads the port the demo home of pid was told to listen on.
func homePort(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	m := listenAddr.FindStringSubmatch(strings.ReplaceAll(string(b), "\x00", " "))
	if m == nil {
		t.Fatalf("no listen address in the home's command line %q", b)
	}
	p, _ := strconv.Atoi(m[1])
	return p
}

// connsTo counts the TCP sockets whose remote port is port, leaving out
// those in TIME_WAIT (already closed by both ends).
func connsTo(port int) int {
	n := 0
	for _, s := range testbin.TCPSockets() {
		if s.RemotePort == port && s.State != "06" {
			n++
		}
	}
	return n
}
