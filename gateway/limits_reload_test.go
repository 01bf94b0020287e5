package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// lrModules is how many module requests one load of the test page makes,
// as a 2,500-module page of a development server does.
const lrModules = 2500

// lrLoad fetches lrModules URLs under base over at most conns keep-alive
// connections, as a browser loads a module page, and returns how many
// answers were 429 and how many were anything else but 200.
func lrLoad(t *testing.T, base string, conns int) (limited, other int) {
	t.Helper()
	tr := &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	var l, o atomic.Int32
	var wg sync.WaitGroup
	next := make(chan int)
	for range conns {
		wg.Go(func() {
			for i := range next {
				res, err := c.Get(fmt.Sprintf("%s/m/%d.js", base, i))
				if err != nil {
					o.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				switch res.StatusCode {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					l.Add(1)
				default:
					o.Add(1)
				}
			}
		})
	}
	for i := range lrModules {
		next <- i
	}
	close(next)
	wg.Wait()
	return int(l.Load()), int(o.Load())
}

// TestDefaultLimitsModulePageReloads serves a page of 2,500 modules as an
// app behind a gateway with the embedded config.yaml's limits. One client
// loads it over six keep-alive connections, then reloads it five times at
// once (thirty connections): no request is limited, since warm requests
// on open connections are not what the default limits count. A flood of
// new connections from that client is still cut, and the refusal is in
// the operator's log with the setting to raise.
func TestDefaultLimitsModulePageReloads(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = io.WriteString(w, "export const v = 1;\n")
	}))
	t.Cleanup(up.Close)
	gw := e2eStartInProcess(t, lbDefaultLimits(t)+fmt.Sprintf(`
apps:
  - slug: mods
    upstream: %s
    strip_prefix: true
`, up.URL))
	base := "http://" + gw.addr + "/apps/mods"
	c := e2eClient(t)
	testbin.Eventually(t, "the app served", func() bool {
		res, _ := e2eGet(t, c, base+"/m/0.js", nil)
		return res.StatusCode == http.StatusOK
	})
	c.CloseIdleConnections()

	if l, o := lrLoad(t, base, 6); l != 0 || o != 0 {
		t.Fatalf("first load: %d limited, %d failed", l, o)
	}
	var wg sync.WaitGroup
	var limited, failed atomic.Int32
	for range 5 {
		wg.Go(func() {
			l, o := lrLoad(t, base, 6)
			limited.Add(int32(l))
			failed.Add(int32(o))
		})
	}
	wg.Wait()
	if limited.Load() != 0 || failed.Load() != 0 {
		t.Errorf("five reloads at once: %d limited, %d failed; want none", limited.Load(), failed.Load())
	}

	// A flood of new connections from the same client still meets a
	// limit: each request below opens a connection of its own.
	cut := 0
	for i := 0; i < 3000 && cut == 0; i++ {
		conn, err := net.Dial("tcp", gw.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, "GET /apps/mods/m/1.js HTTP/1.1\r\nHost: "+gw.addr+"\r\nConnection: close\r\n\r\n")
		head := make([]byte, 12)
		n, _ := io.ReadFull(conn, head)
		_ = conn.Close()
		if n < 12 || string(head[9:12]) != "200" {
			cut = i + 1
		}
	}
	if cut == 0 {
		t.Fatal("3,000 new connections in a row from one client were never limited")
	}
	t.Logf("the flood of connections was cut at connection %d", cut)
	if logs := gw.logs.String(); !strings.Contains(logs, "limits.conn_rate") {
		t.Errorf("no hint naming limits.conn_rate in the log:\n%s", lastLines(logs, 20))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestLimitedRequestsInAccessLog: a request a limit refuses is in the
// access log with the limit that refused it, and the operator's log
// names the setting to raise.
func TestLimitedRequestsInAccessLog(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, "limits:\n  client_rate: 0.001\n  client_burst: 1\n")
	c := e2eClient(t)
	var codes []int
	for range 3 {
		res, _ := e2eGet(t, c, "http://"+gw.addr+"/no-such-route", nil)
		codes = append(codes, res.StatusCode)
	}
	if codes[1] != http.StatusTooManyRequests || codes[2] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v; want the last two 429", codes)
	}
	logs := gw.logs.String()
	refused := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "msg=access") && strings.Contains(l, "status=429") {
			refused++
			if !strings.Contains(l, "limit=client") {
				t.Errorf("an access log line of a limited request does not name the limit: %s", l)
			}
		}
	}
	if refused != 2 {
		t.Errorf("%d limited requests in the access log; want 2\n%s", refused, lastLines(logs, 20))
	}
	if !strings.Contains(logs, `msg="request limited"`) || !strings.Contains(logs, "limits.client_rate") {
		t.Errorf("no operator log line naming limits.client_rate:\n%s", lastLines(logs, 20))
	}
}
