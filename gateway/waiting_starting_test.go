package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/httpprov"
	"github.com/wakegate/wakegate/wakerecord"
)

// TestWaitingStreamShowsStarting: while the provider's wake call runs (a
// control plane of the http provider that holds its answer), the public
// status stream says starting; once the control plane answers, the wake
// goes on to ready and the stream ends on ready.
func TestWaitingStreamShowsStarting(t *testing.T) {
	t.Parallel()
	secret := "starting-test-secret-0123456789"
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	home := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	testbin.Start(t, t.TempDir(), nil, "demo-home", "--addr", home, "--target", "held")

	release := make(chan struct{})
	var woke atomic.Bool
	cp := httptest.NewServer(httpprov.NewVerifier([]byte(secret), time.Minute, nil).Middleware(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			state := map[string]any{"state": "suspended"}
			switch {
			case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/wake"):
				woke.Store(true)
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				state = map[string]any{"state": "running", "endpoint": "http://" + home, "version": "1"}
			case r.Method == http.MethodGet && woke.Load():
				state = map[string]any{"state": "running", "endpoint": "http://" + home, "version": "1"}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(state)
		})))
	t.Cleanup(cp.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	gw := e2eStartInProcess(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 30s
  hold: 100ms
providers:
  http:
    base_url: %s
    secret: file:%s
homes:
  - id: held
    provider: http
`, cp.URL, secretFile))

	c := e2eClient(t)
	done := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.addr+"/node/held/whoami", nil)
		res, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		_ = res.Body.Close()
		done <- res.StatusCode
	}()
	testbin.Eventually(t, "the control plane to hold the wake", woke.Load)
	if v, _ := gw.g.Engine().View("held"); v.Phase != wakerecord.Starting {
		t.Fatalf("phase while the provider's wake call runs: %q, want starting", v.Phase)
	}
	// The public stream says the same: its first report is starting.
	first := wtFirstPhase(t, gw, "held")
	if first != wakerecord.Starting {
		t.Fatalf("the status stream's first phase: %q, want starting", first)
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the held caller: %d, want 200 once the control plane answered", code)
	}
	events, _ := wtEvents(t, gw, "held")
	if last := events[len(events)-1]; last["phase"] != wakerecord.Ready {
		t.Fatalf("the stream after the wake: %v, want ready", events)
	}
}

// wtFirstPhase reads the first report of home target's status stream.
func wtFirstPhase(t *testing.T, gw *e2eGateway, target string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.addr+"/_wakegate/wake/node/"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := e2eClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "\n\n") {
		n, err := res.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(got.String(), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				p, _ := m["phase"].(string)
				return p
			}
		}
	}
	t.Fatalf("no report in the stream: %q", got.String())
	return ""
}
