package wake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/wake"
)

// standInRoutes stands in for the gateway's route table, which wake cannot
// import (the gateway's own table, listener and self-probe are tested in
// gateway/apps_test.go). Its self-probe is a real request to the app's
// upstream: the home's endpoint plus the app's path, or the app's URL.
//
// offline slugs have no route yet, as in a gateway that does not listen
// yet; the self-probe of a fullPath slug keeps /apps/{slug} in the path it
// sends upstream, where the direct check of these apps (strip_prefix) does
// not: a route that reaches the app elsewhere than its health check.
type standInRoutes struct {
	eng      *wake.Engine
	bus      *events.Bus
	specs    map[string]registry.App
	offline  map[string]bool
	fullPath map[string]bool
	mu       sync.Mutex
	public   map[string]bool
}

func (r *standInRoutes) RouteState(slug string) (appstatus.RouteState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.offline[slug] {
		return "", false
	}
	if r.public[slug] {
		return appstatus.RoutePublished, true
	}
	return appstatus.RouteCandidate, true
}

func (r *standInRoutes) SelfProbe(ctx context.Context, slug string) (int, error) {
	s := r.specs[slug]
	base := s.Upstream
	if s.Home != "" {
		hs, err := r.eng.HomeState(ctx, s.Home)
		if err != nil {
			return 0, err
		}
		base = hs.Endpoint + s.Path
	}
	if r.fullPath[slug] {
		base += "/apps/" + slug
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
	if !probe.StatusPasses(res.StatusCode, s.API()) {
		return res.StatusCode, fmt.Errorf("status %d", res.StatusCode)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.public[slug] {
		r.public[slug] = true
		r.bus.Publish(events.Event{Type: events.RoutePublished, App: slug})
	}
	return res.StatusCode, nil
}

func (r *standInRoutes) Withdraw(slug, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.public[slug] {
		r.public[slug] = false
		r.bus.Publish(events.Event{Type: events.RouteWithdrawn, App: slug, Reason: reason})
	}
}

// testApp is an app that serves at its root (strip_prefix), where the
// stand-in routes forward it: its direct check and self-probe ask the
// same path.
func testApp(slug string) registry.App {
	a := registry.App{Slug: slug, StripPrefix: true, Health: registry.AppHealth{Interval: registry.Duration(time.Hour)},
		FailureThreshold: 1, MinRefresh: registry.Duration(time.Millisecond), RefreshTimeout: registry.Duration(10 * time.Second)}
	a.Default()
	return a
}

func newApps(t *testing.T, eng *wake.Engine, specs ...registry.App) (*appstatus.Apps, *events.Bus) {
	t.Helper()
	a, rt := newAppsWithRoutes(t, eng, specs...)
	return a, rt.bus
}

// newAppsWithRoutes is newApps returning the route table stand-in too.
func newAppsWithRoutes(t *testing.T, eng *wake.Engine, specs ...registry.App) (*appstatus.Apps, *standInRoutes) {
	t.Helper()
	bus := events.NewBus(64)
	rt := &standInRoutes{eng: eng, bus: bus, specs: map[string]registry.App{}, public: map[string]bool{},
		offline: map[string]bool{}, fullPath: map[string]bool{}}
	for _, s := range specs {
		rt.specs[s.Slug] = s
	}
	o := appstatus.Options{Routes: rt, Events: bus}
	if eng != nil { // a nil *wake.Engine is not a nil Homes
		o.Homes = eng
	}
	a := appstatus.New(o)
	t.Cleanup(a.Close)
	for _, s := range specs {
		a.Put(s)
	}
	return a, rt
}

// appTrail returns the events of the bus so far, as "type phase/reason",
// after the apps' registrations.
func appTrail(bus *events.Bus) []string {
	var out []string
	for _, e := range bus.Recent() {
		if e.Type == events.AppRegistered {
			continue
		}
		s := e.Type
		if e.Type == events.AppPhase {
			s += " " + e.Phase + "/" + e.Reason
		}
		out = append(out, s)
	}
	return out
}

func TestAppHomeStartStop(t *testing.T) {
	r := newRig(t, rigOptions{})
	s := testApp("demo")
	s.Home, s.Path = rigHome, "/apps/demo"
	apps, bus := newApps(t, r.eng, s)
	ctx := context.Background()

	st, err := apps.Refresh(ctx, "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != appstatus.PhaseStarting || st.Reason != appstatus.ReasonHomeSleeping || st.Route != appstatus.RouteCandidate {
		t.Fatalf("sleeping home: %+v", st)
	}
	st, err = apps.Start(ctx, "demo", 0)
	if err != nil || st.Phase != appstatus.PhaseReady || st.Route != appstatus.RoutePublished {
		t.Fatalf("start: %+v, %v", st, err)
	}
	if st, _ := apps.Status("demo"); st.Operation != "" {
		t.Fatalf("operation %q left over after start", st.Operation)
	}
	st, err = apps.Stop(ctx, "demo", 0)
	if err != nil || st.Phase != appstatus.PhaseStopped || st.Route != appstatus.RouteCandidate {
		t.Fatalf("stop: %+v, %v", st, err)
	}
	if hs, err := r.eng.HomeState(ctx, rigHome); err != nil || hs.Status != "suspended" {
		t.Fatalf("home after stop: %+v, %v", hs, err)
	}
	// Stopped stays stopped: observations do not wake the home.
	if st, _ := apps.RefreshSince(ctx, "demo", time.Now()); st.Phase != appstatus.PhaseStopped {
		t.Fatalf("refresh after stop: %+v", st)
	}
	trail := strings.Join(appTrail(bus), ",")
	// The wake may be seen in flight (home-waking) or not; the rest is fixed.
	trail = strings.Replace(trail, "app.phase starting/home-waking,", "", 1)
	want := "app.phase starting/home-sleeping,route.published,app.phase ready/ready,route.unpublished,app.phase stopped/stopped"
	if trail != want {
		t.Fatalf("events %s; want %s", trail, want)
	}
}

func TestAppWaitForReadyEndsEarlyOnFailed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(up.Close)
	s := testApp("x")
	s.Upstream = up.URL
	apps, _ := newApps(t, nil, s)
	guard, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	st, err := apps.Refresh(guard, "x", appstatus.PhaseReady)
	if err == nil || st.Phase != appstatus.PhaseFailed || st.Reason != appstatus.ReasonUnhealthy || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("wait for ready of a failed app: %+v, %v; want the failed status and an error", st, err)
	}
	if guard.Err() != nil {
		t.Fatal("the wait for ready did not end early on failed")
	}
	if _, err := apps.Refresh(guard, "nope", ""); !errors.Is(err, appstatus.ErrNoApp) {
		t.Fatalf("unknown app: %v", err)
	}
	if _, err := apps.Restart(guard, "x", 0); !errors.Is(err, appstatus.ErrNotHome) {
		t.Fatalf("restart of a URL app: %v", err)
	}
	// A URL app's runtime always runs; the failure is the health rung's.
	if u, _ := url.Parse(up.URL); !strings.Contains(st.Message, "500") || u.Host == "" {
		t.Fatalf("message %q does not name the status", st.Message)
	}
}

// An app whose stored desired state is stopped (a restart: the table
// applies it as the app is registered) is stopped before its first
// observation, not unknown; one that is not stays unknown until observed.
func TestAppStoppedBeforeItsFirstObservation(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(up.Close)
	stopped, running := testApp("s"), testApp("r")
	stopped.Upstream, running.Upstream = up.URL, up.URL
	apps, _ := newApps(t, nil, stopped, running)
	apps.SetDesired("s", true)
	if st, ok := apps.Status("s"); !ok || st.Phase != appstatus.PhaseStopped || st.Reason != appstatus.ReasonStopped {
		t.Fatalf("a stopped app before its first observation: %+v", st)
	}
	if st, ok := apps.Status("r"); !ok || st.Phase != appstatus.PhaseUnknown || st.Reason != appstatus.ReasonNotObserved {
		t.Fatalf("an app never observed: %+v, want unknown/not-observed", st)
	}
}

// ladderHomes is a real engine whose homes are in the states the ladder
// names, each reached the way it happens in production:
//   - h1 is unknown: a roll onto a release that cannot start failed, and
//     so did its rollback (the binary its homes run from is gone);
//   - h2 failed: it ran, its process was killed, and the restart failed
//     (same missing binary);
//   - h3 sleeps: registered and never woken.
func ladderHomes(t *testing.T) *rollRig {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wakegate-copy")
	rlCopy(t, testbin.Build(t), bin)
	r := newRollRig(t, bin, rolls.Lazy)
	if err := r.eng.Register(context.Background(), homes.Spec{ID: "h3", Target: "carol", Provider: "exec", Version: "1"}); err != nil {
		t.Fatal(err)
	}
	if got := r.version("h1"); got != "1" {
		t.Fatalf("h1 runs %q", got)
	}
	r.suspend("h1")
	if _, err := r.request("h2"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	pids := testbin.HomePIDs(t, filepath.Join(r.data, "homes", "h2"))
	if len(pids) != 1 {
		t.Fatalf("h2 processes %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.setTarget("2", rollCommand(filepath.Join(t.TempDir(), "no-such-program"), "{version}"))
	if _, err := r.request("h1"); err == nil {
		t.Fatal("the roll of h1 onto a release that cannot start succeeded")
	}
	for id, want := range map[string]registry.Status{"h1": registry.StatusUnknown, "h2": registry.StatusFailed} {
		testbin.Eventually(t, id+" is "+string(want), func() bool { return r.record(id).Status == want })
	}
	return r
}

// TestAppLadderReasons produces every reason code of the ladder of DESIGN
// rule 11 from a real state: real homes (processes of the demo home, one
// of them left half-woken) and real loopback upstreams. The failed and
// unknown runtimes come before a desired stop.
func TestAppLadderReasons(t *testing.T) {
	homes := ladderHomes(t)
	slow := newRig(t, rigOptions{boot: time.Hour, readyTimeout: 5 * time.Minute})
	if err := slow.eng.Start(rigHome); err != nil {
		t.Fatal(err)
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/h" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	app := func(upstream, home string, edit func(*registry.App)) registry.App {
		a := registry.App{Slug: "x", Upstream: upstream, Home: home, StripPrefix: true, Health: registry.AppHealth{Path: "/h"}}
		if edit != nil {
			edit(&a)
		}
		return withTestSettings(a)
	}
	stopped := func(a *registry.App) { a.DesiredState = registry.AppStopped }
	for _, tc := range []struct {
		name    string
		eng     *wake.Engine
		app     registry.App
		routes  func(*standInRoutes)
		observe bool // false: the status before any observation
		phase   appstatus.Phase
		reason  string
	}{
		{"never observed", nil, app(ok.URL, "", nil), nil, false, appstatus.PhaseUnknown, appstatus.ReasonNotObserved},
		{"home failed", homes.eng, app("", "h2", nil), nil, true, appstatus.PhaseFailed, appstatus.ReasonRuntimeFailed},
		{"home failed, app stopped", homes.eng, app("", "h2", stopped), nil, true, appstatus.PhaseFailed, appstatus.ReasonRuntimeFailed},
		{"home unknown", homes.eng, app("", "h1", nil), nil, true, appstatus.PhaseUnknown, appstatus.ReasonRuntimeUnknown},
		{"home unknown, app stopped", homes.eng, app("", "h1", stopped), nil, true, appstatus.PhaseUnknown, appstatus.ReasonRuntimeUnknown},
		{"home not registered", homes.eng, app("", "nobody", nil), nil, true, appstatus.PhaseUnknown, appstatus.ReasonRuntimeUnknown},
		{"app stopped", nil, app(ok.URL, "", stopped), nil, true, appstatus.PhaseStopped, appstatus.ReasonStopped},
		{"sleeping home, app stopped", homes.eng, app("", "h3", stopped), nil, true, appstatus.PhaseStopped, appstatus.ReasonStopped},
		{"home waking", slow.eng, app("", rigHome, nil), nil, true, appstatus.PhaseStarting, appstatus.ReasonHomeWaking},
		{"home sleeping", homes.eng, app("", "h3", nil), nil, true, appstatus.PhaseStarting, appstatus.ReasonHomeSleeping},
		{"unhealthy in the start period", nil, app(failing.URL, "", func(a *registry.App) {
			a.Health.StartPeriod = registry.Duration(time.Hour)
		}), nil, true, appstatus.PhaseStarting, appstatus.ReasonHealthStarting},
		{"unhealthy", nil, app(failing.URL, "", nil), nil, true, appstatus.PhaseFailed, appstatus.ReasonUnhealthy},
		{"endpoint refuses", nil, app(closed.URL, "", nil), nil, true, appstatus.PhaseStarting, appstatus.ReasonEndpointNotReady},
		{"no route yet", nil, app(ok.URL, "", nil), func(r *standInRoutes) { r.offline["x"] = true }, true,
			appstatus.PhaseStarting, appstatus.ReasonRoutePending},
		{"self-probe fails", nil, app(ok.URL, "", nil), func(r *standInRoutes) { r.fullPath["x"] = true }, true,
			appstatus.PhaseStarting, appstatus.ReasonProbeFailed},
		{"ready", nil, app(ok.URL, "", nil), nil, true, appstatus.PhaseReady, appstatus.ReasonReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apps, rt := newAppsWithRoutes(t, tc.eng, tc.app)
			if tc.routes != nil {
				tc.routes(rt)
			}
			st, _ := apps.Status("x")
			if tc.observe {
				var err error
				if st, err = apps.RefreshSince(context.Background(), "x", time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if st.Phase != tc.phase || st.Reason != tc.reason || st.Message == "" || st.Stale {
				t.Fatalf("status %+v; want %s/%s with a message", st, tc.phase, tc.reason)
			}
			if tc.reason == appstatus.ReasonProbeFailed && st.ProbeStatus != http.StatusNotFound {
				t.Fatalf("probe status %d; want the 404 the self-probe saw", st.ProbeStatus)
			}
			if tc.name == "home unknown" {
				// Nothing but a wake or a roll settles an unknown
				// runtime: a wait for ready says so at once.
				guard, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
				defer cancel()
				st, err := apps.Refresh(guard, "x", appstatus.PhaseReady)
				if err == nil || guard.Err() != nil || st.Phase != appstatus.PhaseUnknown || !strings.Contains(err.Error(), "not known") {
					t.Fatalf("wait for ready of an app whose home is unknown: %+v, %v; want an early error", st, err)
				}
			}
		})
	}
}

// withTestSettings is a with the observation settings of testApp and every other
// default filled.
func withTestSettings(a registry.App) registry.App {
	base := testApp(a.Slug)
	a.FailureThreshold, a.MinRefresh, a.RefreshTimeout = base.FailureThreshold, base.MinRefresh, base.RefreshTimeout
	a.Health.Interval = base.Health.Interval
	a.Default()
	return a
}

// TestAppRegisteredComesFirst: an observation can begin the moment Put
// makes an app visible (a request for it, say); its first phase event
// must still come after the app's registration in the event stream.
func TestAppRegisteredComesFirst(t *testing.T) {
	apps, bus := newApps(t, nil)
	ctx := context.Background()
	for i := range 200 {
		s := testApp(fmt.Sprintf("app%d", i))
		s.Upstream = "http://127.0.0.1:9" // never dialled: a stopped app's ladder ends at once
		s.DesiredState = registry.AppStopped
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				if _, ok := apps.Status(s.Slug); ok {
					_, _ = apps.Refresh(ctx, s.Slug, "")
					return
				}
				runtime.Gosched()
			}
		}()
		apps.Put(s)
		<-done
		var seen []string
		for _, e := range bus.Recent() {
			if e.App == s.Slug {
				seen = append(seen, e.Type)
			}
		}
		if len(seen) == 0 || seen[0] != events.AppRegistered {
			t.Fatalf("%s: events %v, want %s first", s.Slug, seen, events.AppRegistered)
		}
	}
}
