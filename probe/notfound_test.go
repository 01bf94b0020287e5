package probe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestProbeAutoGivesUpOnNotFound: a real Python HTTP server that serves
// nothing under /node/{target} answers 404 to every upgrade and GET; the
// auto probe gives up after the not-found window, long before its ctx
// ends, with ErrNotFound and the hint that names the 404s.
func TestProbeAutoGivesUpOnNotFound(t *testing.T) {
	t.Parallel()
	py := probeTestPython(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*testbin.WaitLimit)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: py, WSPath: "/node/py", Path: "/node/py/",
		AltPaths: []Path{{Path: "/healthz"}}}, nil)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("probe of a server that answers 404 everywhere: %v; want ErrNotFound", err)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the probe waited out its ctx: %v", err)
	}
	if res.Attempts < NotFoundMinAttempts || res.Status != http.StatusNotFound {
		t.Errorf("result %+v: want at least %d attempts, the last answered 404", res, NotFoundMinAttempts)
	}
	for _, want := range []string{"ws handshake: status 404", "GET /node/py/: http get: status 404", "GET /healthz: http get: status 404"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if h := Hint(err); !strings.Contains(h, "404") || !strings.Contains(h, "strip_prefix: true") {
		t.Errorf("hint %q does not name the 404s and strip_prefix", h)
	}
	if h := Hint(fmt.Errorf("wake: %w", err)); h == "" {
		t.Error("a wrapped probe error carries no hint")
	}
}

// TestProbeAutoWaitsOutBriefNotFound: a server that answers 404 to
// everything for its first second (its routes load), then 200, is waited
// for: the probe passes after some 404s.
func TestProbeAutoWaitsOutBriefNotFound(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		first time.Time
		seen  int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		booting := time.Since(first) < time.Second
		seen++
		mu.Unlock()
		if booting {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testbin.WaitLimit)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.URL, WSPath: "/node/x", Path: "/node/x/"}, nil)
	if err != nil {
		t.Fatalf("probe of a server that 404s for a second: %v", err)
	}
	if res.Attempts < 2 || res.Status != http.StatusOK {
		t.Errorf("result %+v: want a pass on 200 after failed attempts", res)
	}
}

// TestProbeAutoStatuses: the home's probe.statuses decide its auto probe's
// GET of Path, as they do an http probe's: a listed status passes, any
// other (a 200 among them) does not; the apps' health paths keep their
// rules.
func TestProbeAutoStatuses(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/node/x/":
			w.WriteHeader(http.StatusTeapot)
		case "/ok":
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name     string
		path     string
		statuses []int
		alts     []Path
		pass     int // the status it passes on; 0: it fails
	}{
		{"listed status passes", "/node/x/", []int{http.StatusTeapot}, nil, http.StatusTeapot},
		{"no list: the rules refuse 418", "/node/x/", nil, nil, 0},
		{"a 200 not in the list fails", "/ok", []int{http.StatusTeapot}, nil, 0},
		{"an app's path keeps its rules", "/node/x/", []int{http.StatusAccepted}, []Path{{Path: "/ok"}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.URL, WSPath: "/node/x", Path: tc.path,
				Statuses: tc.statuses, AltPaths: tc.alts}, nil)
			switch {
			case tc.pass != 0 && (err != nil || res.Status != tc.pass):
				t.Fatalf("%+v, %v; want a pass on %d", res, err, tc.pass)
			case tc.pass == 0 && err == nil:
				t.Fatalf("passed on %d; want a failure", res.Status)
			}
		})
	}
}

// TestProbeAutoUpgradeThenAppPath: the auto probe of a home with an app
// tries the upgrade first (a GET must not vouch for a broker that would
// answer it, DESIGN rule 36), and once the upgrade is refused, the app's
// health path before the home's own path: a home that serves only its
// app is proven in one attempt, with no GET of /node/{target}.
func TestProbeAutoUpgradeThenAppPath(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: Auto, Endpoint: srv.URL, WSPath: "/node/x", Path: "/node/x/",
		AltPaths: []Path{{Path: "/"}}}, nil)
	if err != nil || res.Attempts != 1 || res.Status != http.StatusOK {
		t.Fatalf("probe: %+v, %v; want a pass at the first attempt", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, " ") != "/node/x /" {
		t.Fatalf("the home was sent %q; want the upgrade, then the app's path", seen)
	}
}
