package wake_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// A failed wake's error is a kind with a public code and sentence; the
// probe's error (with its address) is the cause, and where there is a
// likely fix the hint names it: a home that answers its WebSocket probe
// with 404 probably does not serve WebSockets, so probe: http is the hint.
func TestWakeErrorKeepsCauseOutOfMessageAndHints(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	e := wake.New(wake.Options{
		Store:     lcStore(t),
		Providers: map[string]provider.Provider{"static": &provider.Static{Endpoints: map[string]string{"h1": srv.URL}}},
		Sessions:  sessions.New(), Instance: "test",
		WarmTTL: time.Minute, ReadyTimeout: time.Second, RetryAfter: 2 * time.Second,
		MaxConcurrent: 1, FailureBackoff: time.Second, RelayHeader: "X-Wakegate-Relay",
		Log: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(e.Close)
	ctx := context.Background()
	if err := e.Register(ctx, homes.Spec{ID: "h1", Target: "alice", Provider: "static"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.EnsureAwake(ctx, "h1")
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.Failed || fe.Code != homefault.CodeWakeTimeout || fe.RetryAfter != 2*time.Second {
		t.Fatalf("error %v, want a failed wake_timeout with the configured Retry-After", err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if strings.Contains(fe.Message, host) || !strings.HasSuffix(fe.Message, ".") {
		t.Fatalf("public message %q: want a sentence without the home's address", fe.Message)
	}
	if fe.Cause == nil || !strings.Contains(fe.Cause.Error(), host) || !strings.Contains(fe.Cause.Error(), "404") {
		t.Fatalf("cause %v: want the probe's error with the address and the 404", fe.Cause)
	}
	if !strings.Contains(fe.Hint, "probe: http") {
		t.Fatalf("hint %q: want the probe: http fix", fe.Hint)
	}
	r := fault.Classify(err)
	if r.Status != http.StatusServiceUnavailable || strings.Contains(r.Message, host) {
		t.Fatalf("classified %+v: want 503 with no address in the public message", r)
	}
	if _, err := e.EnsureAwake(ctx, "nobody"); !fault.Is(err, fault.NotFound) {
		t.Fatalf("unknown home: %v, want not found", err)
	}
}
