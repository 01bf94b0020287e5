package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/all"
)

// busyProvider is a small provider whose wakes fail the way a remote
// provider's do when its API is over its rate limit: an *provider.Error
// with a retry-after.
type busyProvider struct {
	provider.Static
	retry time.Duration
}

func (b *busyProvider) Name() string { return "busy" }

func (b *busyProvider) Wake(context.Context, provider.Spec) (provider.Result, error) {
	return provider.Result{}, &provider.Error{Op: "wake", Reason: provider.ReasonRateLimited, RetryAfter: b.retry,
		Err: errors.New("429 from the machines API at 10.0.0.7")}
}

// TestProviderRetryAfter: a provider's retry-after reaches the caller's
// Retry-After header through the engine's error, and the provider's cause
// stays out of the public body. The provider is registered through the
// gateway's registry and built by it, like any other.
func TestProviderRetryAfter(t *testing.T) {
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
admin:
  listen: ""
homes:
  - id: h1
    target: h
    provider: busy
    probe: tcp
`, filepath.Join(t.TempDir(), "data"))
	built := 0
	cfg, err := config.Load("busy.yaml", []byte(text), all.With(func(r *provider.Registry) {
		r.MustRegister("busy", provider.Factory{New: func(provider.Env, provider.Section) (provider.Provider, error) {
			built++
			return &busyProvider{retry: 42 * time.Second}, nil
		}})
	}))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(g.Close)
	if built != 1 {
		t.Fatalf("the busy provider was built %d times, want 1", built)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + "/node/h/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "42" {
		t.Fatalf("status %d, Retry-After %q, want 503 and 42; body %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if strings.Contains(string(body), "10.0.0.7") || strings.Contains(string(body), "machines API") {
		t.Errorf("the provider's cause reached the public body: %s", body)
	}
}
