package wake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// apRoutes stands in for the gateway's route table, which wake cannot
// import (the gateway's own table, listener and self-probe are tested in
// gateway/apps_test.go). Its self-probe is a real request to the app's
// upstream: the home's endpoint plus the app's path, or the app's URL.
type apRoutes struct {
	eng    *wake.Engine
	bus    *wake.Bus
	specs  map[string]registry.App
	mu     sync.Mutex
	public map[string]bool
}

func (r *apRoutes) RouteState(slug string) (wake.RouteState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.public[slug] {
		return wake.RoutePublished, true
	}
	return wake.RouteCandidate, true
}

func (r *apRoutes) SelfProbe(ctx context.Context, slug string) (int, error) {
	s := r.specs[slug]
	base := s.Upstream
	if s.Home != "" {
		hs, err := r.eng.HomeState(ctx, s.Home)
		if err != nil {
			return 0, err
		}
		base = hs.Endpoint + s.Path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+s.Health.Path, nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if !wake.StatusPasses(res.StatusCode, s.API()) {
		return res.StatusCode, fmt.Errorf("status %d", res.StatusCode)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.public[slug] {
		r.public[slug] = true
		r.bus.Publish(wake.Event{Type: wake.EventRoutePublished, App: slug})
	}
	return res.StatusCode, nil
}

func (r *apRoutes) Withdraw(slug, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.public[slug] {
		r.public[slug] = false
		r.bus.Publish(wake.Event{Type: wake.EventRouteWithdrawn, App: slug, Reason: reason})
	}
}

func apSpec(slug string) registry.App {
	a := registry.App{Slug: slug, Health: registry.AppHealth{Interval: registry.Duration(time.Hour)},
		FailureThreshold: 1, MinRefresh: registry.Duration(time.Millisecond), RefreshTimeout: registry.Duration(10 * time.Second)}
	a.Default()
	return a
}

func apNew(t *testing.T, eng *wake.Engine, specs ...registry.App) (*wake.Apps, *wake.Bus) {
	t.Helper()
	bus := wake.NewBus(64)
	rt := &apRoutes{eng: eng, bus: bus, specs: map[string]registry.App{}, public: map[string]bool{}}
	for _, s := range specs {
		rt.specs[s.Slug] = s
	}
	a := wake.NewApps(wake.AppsOptions{Engine: eng, Routes: rt, Events: bus}, specs)
	t.Cleanup(a.Close)
	return a, bus
}

// apTrail returns the events of the bus so far, as "type phase/reason".
func apTrail(bus *wake.Bus) []string {
	var out []string
	for _, e := range bus.Recent() {
		s := e.Type
		if e.Type == wake.EventAppPhase {
			s += " " + e.Phase + "/" + e.Reason
		}
		out = append(out, s)
	}
	return out
}

func TestAppHomeStartStop(t *testing.T) {
	r := newRig(t, rigOptions{})
	s := apSpec("demo")
	s.Home, s.Path = rigHome, "/apps/demo"
	apps, bus := apNew(t, r.eng, s)
	ctx := context.Background()

	st, err := apps.Refresh(ctx, "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != wake.PhaseStarting || st.Reason != wake.ReasonHomeSleeping || st.Route != wake.RouteCandidate {
		t.Fatalf("sleeping home: %+v", st)
	}
	st, err = apps.Start(ctx, "demo", 0)
	if err != nil || st.Phase != wake.PhaseReady || st.Route != wake.RoutePublished {
		t.Fatalf("start: %+v, %v", st, err)
	}
	if st, _ := apps.Status("demo"); st.Operation != "" {
		t.Fatalf("operation %q left over after start", st.Operation)
	}
	st, err = apps.Stop(ctx, "demo", 0)
	if err != nil || st.Phase != wake.PhaseStopped || st.Route != wake.RouteCandidate {
		t.Fatalf("stop: %+v, %v", st, err)
	}
	if hs, err := r.eng.HomeState(ctx, rigHome); err != nil || hs.Status != "suspended" {
		t.Fatalf("home after stop: %+v, %v", hs, err)
	}
	// Stopped stays stopped: observations do not wake the home.
	if st, _ := apps.RefreshSince(ctx, "demo", time.Now()); st.Phase != wake.PhaseStopped {
		t.Fatalf("refresh after stop: %+v", st)
	}
	trail := strings.Join(apTrail(bus), ",")
	// The wake may be seen in flight (home-waking) or not; the rest is fixed.
	trail = strings.Replace(trail, "app.phase starting/home-waking,", "", 1)
	want := "app.phase starting/home-sleeping,route.published,app.phase ready/ready,route.unpublished,app.phase stopped/stopped"
	if trail != want {
		t.Fatalf("events %s; want %s", trail, want)
	}
}

func TestAppWaitPhaseEndsEarlyOnFailed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(up.Close)
	s := apSpec("x")
	s.Upstream = up.URL
	apps, _ := apNew(t, nil, s)
	guard, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	st, err := apps.WaitPhase(guard, "x", wake.PhaseReady, time.Hour)
	if err == nil || st.Phase != wake.PhaseFailed || st.Reason != wake.ReasonUnhealthy || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("wait for ready of a failed app: %+v, %v; want the failed status and an error", st, err)
	}
	if guard.Err() != nil {
		t.Fatal("WaitPhase did not end early on failed")
	}
	if _, err := apps.Refresh(guard, "nope", ""); !errors.Is(err, wake.ErrNoApp) {
		t.Fatalf("unknown app: %v", err)
	}
	if _, err := apps.Restart(guard, "x", 0); !errors.Is(err, wake.ErrNotHome) {
		t.Fatalf("restart of a URL app: %v", err)
	}
	// A URL app's runtime always runs; the failure is the health rung's.
	if u, _ := url.Parse(up.URL); !strings.Contains(st.Message, "500") || u.Host == "" {
		t.Fatalf("message %q does not name the status", st.Message)
	}
}
