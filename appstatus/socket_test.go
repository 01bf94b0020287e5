package appstatus

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/registry"
)

// appTestUnixHome serves, on a Unix socket at path, 200 to GET /node/alice
// carrying the relay header X-Wakegate-Relay, 404 to anything else, and
// counts the requests it answered 200 and the Host headers that were not
// the stand-in.
func appTestUnixHome(t *testing.T, path string) (hits, badHost *atomic.Int64) {
	t.Helper()
	hits, badHost = &atomic.Int64{}, &atomic.Int64{}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "localhost" {
			badHost.Add(1)
		}
		if r.URL.Path != "/node/alice" || r.Header.Get("X-Wakegate-Relay") == "" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return hits, badHost
}

// TestAppHealthCheckUnixSocket runs an app's direct health checks (http
// and tcp) against a home on a Unix socket, as the ladder builds their
// base from the home's endpoint.
func TestAppHealthCheckUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "home.sock")
	hits, badHost := appTestUnixHome(t, sock)
	a := New(Options{})
	defer a.Close()
	guard, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	base := endpoint.HTTP("unix://"+sock) + "/node"
	for _, typ := range []string{registry.HealthHTTP, registry.HealthTCP} {
		app := registry.App{Slug: "s", Upstream: "http://unused", Kind: "api",
			Health: registry.AppHealth{Type: typ, Path: "/alice", Timeout: registry.Duration(5 * time.Second)}}
		// The test home wants the relay header, which a home's app gets
		// from the engine; this one has no home, so the path alone fails
		// with 404 and passes only as a tcp check or with the header.
		err := a.check(guard, app, base, app.Health.Path)
		switch typ {
		case registry.HealthTCP:
			if err != nil {
				t.Errorf("tcp check: %v", err)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), "404") {
				t.Errorf("http check: %v, want the home's 404 (it was reached)", err)
			}
		}
	}
	if badHost.Load() != 0 || hits.Load() != 0 {
		t.Errorf("host mismatches %d, authorised hits %d", badHost.Load(), hits.Load())
	}
}
