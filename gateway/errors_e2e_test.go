package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// erGateway starts an in-process gateway whose one home h1 (/node/alice)
// runs command, with a short ready timeout and no failure backoff in the
// way of a second request.
func erGateway(t *testing.T, command []string) (url string, logs *testbin.LogBuffer, data string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(t.TempDir(), "data")
	cfg := map[string]any{
		"listen": ln.Addr().String(), "data_dir": data, "instance": "e2e",
		"log":    map[string]any{"format": "json", "level": "info", "access": true},
		"server": map[string]any{"drain_grace": "2s"},
		// A failure backoff longer than the test's two requests take, however
		// slow the machine: a program that cannot start fails its home until
		// the backoff ends, and the second request must come before that.
		"wake": map[string]any{"warm_ttl": "1m", "ready_timeout": "700ms", "wake_timeout": "20s", "hold": "10s",
			"idle_timeout": "0s", "retry_after": "2s", "failure_backoff": "1m"},
		"exec":  map[string]any{"command": command, "stop_grace": "2s"},
		"homes": []any{map[string]any{"id": wkHome, "target": wkTarget}},
	}
	text, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := all.Load("errors.yaml", text)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs = &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), c, gateway.NewLogger(c.Log, logs))
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
		testbin.KillHomes(data)
	})
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	return "http://" + ln.Addr().String(), logs, data
}

// erLeaks returns the internal details of a failed wake that body shows:
// any of secrets, a loopback address or port, a pid, a path.
func erLeaks(body string, secrets ...string) []string {
	var out []string
	for _, s := range secrets {
		if s != "" && strings.Contains(body, s) {
			out = append(out, s)
		}
	}
	for _, s := range []string{"127.0.0.1", "localhost", "pid", "/tmp", "demo-home", "exec:", "dial", "refused", "no such file"} {
		if strings.Contains(strings.ToLower(body), s) {
			out = append(out, s)
		}
	}
	return out
}

// A failed wake answers the public caller with a code, a sentence and the
// request id, never with the cause: no path, port, pid or command line. The
// gateway's log carries the cause with the same request id.
func TestPublicErrorsCarryNoInternalDetail(t *testing.T) {
	bin := testbin.Build(t)
	missing := filepath.Join(t.TempDir(), "no-such-home-binary")
	cases := []struct {
		name    string
		command []string
		// code answers the first request, then the code answers the
		// second (a program that cannot start fails its home at once).
		code, then string
		// cause is a piece of the cause the log must carry.
		cause string
	}{
		{"command does not exist", []string{missing, "--port", "{port}"}, "wake_failed", "home_failed", "no-such-home-binary"},
		// The home runs but never listens within the ready timeout: every
		// probe attempt is refused on its loopback port.
		{"home never listens", []string{bin, "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}",
			"--version", "{version}", "--boot-delay", "1h"}, "wake_timeout", "wake_timeout", "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, logs, data := erGateway(t, tc.command)
			client := &http.Client{Timeout: 30 * time.Second}
			for i, accept := range []string{"application/json", "text/html"} {
				req, err := http.NewRequest(http.MethodGet, url+wkWhoami, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Accept", accept)
				// An untrusted peer's request id is replaced by the gateway's.
				req.Header.Set("X-Request-Id", "err-test-"+strconv.Itoa(i))
				res, body, err := wkDo(client, req)
				if err != nil {
					t.Fatal(err)
				}
				if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
					t.Fatalf("%s: status %d Retry-After %q, want 503 with Retry-After:\n%s", accept, res.StatusCode, res.Header.Get("Retry-After"), body)
				}
				if leaks := erLeaks(body, missing, bin, data, url); len(leaks) > 0 {
					t.Fatalf("%s: public body shows %q:\n%s", accept, leaks, body)
				}
				id := erRequestID(t, accept, body)
				code := tc.code
				if i > 0 {
					code = tc.then
				}
				if accept == "application/json" {
					var b struct {
						Error struct{ Code, Message string } `json:"error"`
					}
					if err := json.Unmarshal([]byte(body), &b); err != nil {
						t.Fatalf("json body %q: %v", body, err)
					}
					if b.Error.Code != code || !strings.HasSuffix(b.Error.Message, ".") {
						t.Fatalf("json body %q: want code %s and a sentence", body, code)
					}
				} else if !strings.Contains(body, code) || !strings.Contains(body, "<p>") {
					t.Fatalf("html body lacks code %s or a sentence:\n%s", code, body)
				}
				testbin.Eventually(t, "a log line with the cause and the request id", func() bool {
					for _, line := range strings.Split(logs.String(), "\n") {
						if strings.Contains(line, `"`+id+`"`) && strings.Contains(line, tc.cause) {
							return true
						}
					}
					return false
				})
			}
		})
	}
}

// erRequestID returns the request id shown in a public error body.
func erRequestID(t *testing.T, accept, body string) string {
	t.Helper()
	if accept == "application/json" {
		var b struct {
			Error struct {
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.RequestID == "" {
			t.Fatalf("json body %q has no request id (%v)", body, err)
		}
		return b.Error.RequestID
	}
	_, after, ok := strings.Cut(body, "request ")
	if !ok {
		t.Fatalf("html body has no request id:\n%s", body)
	}
	id, _, _ := strings.Cut(after, "<")
	return strings.TrimSpace(id)
}

// wkDo sends req and returns the response with its body read.
func wkDo(c *http.Client, req *http.Request) (*http.Response, string, error) {
	res, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res, b.String(), nil
}
