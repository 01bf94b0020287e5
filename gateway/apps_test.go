package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider/all"
)

// testUpstream is a real loopback upstream whose behaviour a test switches.
type testUpstream struct {
	URL  string
	addr string
	srv  *http.Server
	ln   net.Listener

	mu      sync.Mutex
	handler http.HandlerFunc
	// health counts direct health checks (no X-Forwarded-For), probes
	// requests that came through the gateway to the health path.
	health, probes atomic.Int64
	headers        []http.Header // every request's headers, in order
	healthPath     string
}

// newTestUpstream serves h on a loopback port until the test ends. Requests
// to healthPath are counted as direct checks or self-probes.
func newTestUpstream(t testing.TB, healthPath string, h http.HandlerFunc) *testUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &testUpstream{ln: ln, addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(), handler: h, healthPath: healthPath}
	u.serve()
	t.Cleanup(u.stop)
	return u
}

func (u *testUpstream) serve() {
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		h := u.handler
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, u.healthPath) {
			if r.Header.Get("X-Forwarded-For") == "" {
				u.health.Add(1)
			} else {
				u.probes.Add(1)
			}
		}
		h(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func(srv *http.Server, ln net.Listener) { _ = srv.Serve(ln) }(u.srv, u.ln)
}

// stop closes the upstream: its port refuses connections.
func (u *testUpstream) stop() { _ = u.srv.Close() }

// restart listens on the same port again.
func (u *testUpstream) restart(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", u.addr, err)
	}
	u.ln = ln
	u.serve()
}

func (u *testUpstream) set(h http.HandlerFunc) {
	u.mu.Lock()
	u.handler = h
	u.mu.Unlock()
}

func (u *testUpstream) seenHeaders() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.headers...)
}

func statusHandler(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// appGateway is an in-process gateway on a loopback port.
type appGateway struct {
	g    *gateway.Gateway
	base string
	data string // the data directory
	logs *testbin.LogBuffer
}

// startAppGateway builds a gateway from body (everything but listen and data_dir;
// homes run the real demo-home binary) and serves it until the test ends.
func startAppGateway(t testing.TB, body string) *appGateway {
	t.Helper()
	gw := e2eStartInProcess(t, "log:\n  access: false\n"+body)
	// Serve runs on: observations before it listens would find no route.
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	if _, err := gw.g.Addr(ctx); err != nil {
		t.Fatalf("the gateway does not listen: %v", err)
	}
	return &appGateway{g: gw.g, base: "http://" + gw.addr, data: gw.data, logs: gw.logs}
}

// get sends GET path with the headers and returns the status, the
// X-Wakegate-App-Reason header and the body.
func (gw *appGateway) get(t testing.TB, path string, hdr map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, gw.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = []string{v} // as given: no canonical letter case
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("X-Wakegate-App-Reason"), string(b)
}

// status returns the app's stored status.
func (gw *appGateway) status(t testing.TB, slug string) appstatus.Status {
	t.Helper()
	st, ok := gw.g.Apps().Status(slug)
	if !ok {
		t.Fatalf("no app %s", slug)
	}
	return st
}

// waitPhase waits (guarded by testbin's limit) for slug's phase and reason.
func (gw *appGateway) waitReason(t testing.TB, slug, reason string) appstatus.Status {
	t.Helper()
	var st appstatus.Status
	testbin.Eventually(t, slug+" reason "+reason, func() bool {
		st = gw.status(t, slug)
		return st.Reason == reason
	})
	return st
}

func (gw *appGateway) route(slug string) appstatus.RouteState {
	for _, r := range gw.g.Routes() {
		if r.Slug == slug {
			return r.State
		}
	}
	return ""
}

// appEntry is the YAML of one URL app.
func appEntry(slug, upstream, kind, extra string) string {
	return fmt.Sprintf("  - slug: %s\n    upstream: %q\n    kind: %s\n%s", slug, upstream, kind, extra)
}

func TestAppPublishedOnlyAfterSelfProbe(t *testing.T) {
	up := newTestUpstream(t, "/healthz", statusHandler(http.StatusServiceUnavailable))
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "api", "    strip_prefix: true\n    health: {path: /healthz, interval: 50ms}\n    min_refresh: 10ms\n"))
	st := gw.waitReason(t, "x", appstatus.ReasonUnhealthy)
	if st.Phase != appstatus.PhaseFailed || st.Route != appstatus.RouteCandidate {
		t.Fatalf("unhealthy upstream: %+v", st)
	}
	code, reason, body := gw.get(t, "/apps/x/healthz", nil)
	if code != http.StatusServiceUnavailable || reason != appstatus.ReasonUnhealthy || !strings.Contains(body, `"code":"app_failed"`) {
		t.Fatalf("before the self-probe passed: %d %q %s; want 503 naming the reason", code, reason, body)
	}
	if n := up.probes.Load(); n != 0 {
		t.Fatalf("an unhealthy app was self-probed %d times (the ladder stops at health)", n)
	}
	up.set(statusHandler(http.StatusOK))
	st = gw.waitReason(t, "x", appstatus.ReasonReady)
	if st.Phase != appstatus.PhaseReady || st.Route != appstatus.RoutePublished || st.ProbeStatus != 200 {
		t.Fatalf("healthy upstream: %+v", st)
	}
	if up.probes.Load() == 0 {
		t.Fatal("ready without a self-probe reaching the upstream")
	}
	if code, _, body := gw.get(t, "/apps/x/healthz", nil); code != http.StatusOK {
		t.Fatalf("after publish: %d %s", code, body)
	}
}

// under answers 200 below prefix and 404 elsewhere: an app told its base
// path, as an app without strip_prefix is.
func under(prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, prefix) {
			statusHandler(http.StatusNotFound)(w, r)
			return
		}
		statusHandler(http.StatusOK)(w, r)
	}
}

// TestAppServedUnderItsPrefix: an app without strip_prefix is forwarded
// /apps/{slug}/..., so one that serves there and nowhere else (404 at its
// root) is healthy with the default health path: its direct check asks
// for /apps/x/, where the self-probe's GET /apps/x/ is forwarded, and the
// route is published.
func TestAppServedUnderItsPrefix(t *testing.T) {
	up := newTestUpstream(t, "/apps/x/", under("/apps/x/"))
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "ui", "    health: {interval: 20ms}\n    min_refresh: 1ms\n"))
	st := gw.waitReason(t, "x", appstatus.ReasonReady)
	if st.Phase != appstatus.PhaseReady || st.Route != appstatus.RoutePublished {
		t.Fatalf("status %+v; want ready and published", st)
	}
	if up.health.Load() == 0 || up.probes.Load() == 0 {
		t.Fatalf("direct checks %d, self-probes %d at /apps/x/; want both", up.health.Load(), up.probes.Load())
	}
	if code, _, body := gw.get(t, "/apps/x/page", nil); code != http.StatusOK {
		t.Fatalf("GET /apps/x/page: %d %s", code, body)
	}
}

// notProxied answers 404 to a request that came through a proxy (it
// carries X-Forwarded-For) and 200 to any other: an upstream that the
// direct health check finds healthy and that refuses what the gateway
// forwards, as a server bound to its own host names does.
func notProxied(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Forwarded-For") != "" {
		statusHandler(http.StatusNotFound)(w, r)
		return
	}
	statusHandler(http.StatusOK)(w, r)
}

func TestAppHealthyDirectlyButNotThroughGatewayNeverPublishes(t *testing.T) {
	// The direct check and the self-probe reach the same upstream path
	// (/apps/x/healthz: the route keeps its prefix), but the upstream
	// refuses what comes through the gateway: the direct check passes,
	// the path through the gateway gets 404.
	up := newTestUpstream(t, "/apps/x/healthz", notProxied)
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "ui", "    health: {path: /healthz, interval: 20ms}\n    min_refresh: 1ms\n"))
	st := gw.waitReason(t, "x", appstatus.ReasonProbeFailed)
	if st.Phase != appstatus.PhaseStarting || st.ProbeStatus != http.StatusNotFound || !strings.Contains(st.Message, "404") {
		t.Fatalf("status %+v; want starting/probe-failed naming 404", st)
	}
	testbin.Eventually(t, "more self-probes", func() bool { return up.probes.Load() >= 5 })
	if up.health.Load() == 0 {
		t.Fatal("no direct health check reached the upstream")
	}
	if r := gw.route("x"); r != appstatus.RouteCandidate {
		t.Fatalf("route %s after failed self-probes; want candidate", r)
	}
	code, reason, body := gw.get(t, "/apps/x/healthz", map[string]string{"Accept": "text/html"})
	if code != http.StatusServiceUnavailable || reason != appstatus.ReasonProbeFailed || !strings.Contains(body, "<html") || !strings.Contains(body, "404") {
		t.Fatalf("user request: %d %q %s; want a 503 page with the reason and the status seen", code, reason, body)
	}
}

func TestAppProbeHeaderFromOutsideIsOrdinary(t *testing.T) {
	// x stays a candidate (a UI app answering 401 never passes); y is
	// published. Both record every request's headers.
	x := newTestUpstream(t, "/h", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apps/x/h" || r.URL.Path == "/h" {
			statusHandler(http.StatusOK)(w, r)
			return
		}
		statusHandler(http.StatusTeapot)(w, r)
	})
	x.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") != "" && r.URL.Path == "/apps/x/h" {
			statusHandler(http.StatusUnauthorized)(w, r) // only the path through the gateway fails
			return
		}
		statusHandler(http.StatusOK)(w, r)
	})
	y := newTestUpstream(t, "/h", statusHandler(http.StatusOK))
	gw := startAppGateway(t, "apps:\n"+appEntry("x", x.URL, "ui", "    health: {path: /h, interval: 20ms}\n    min_refresh: 1ms\n")+
		appEntry("y", y.URL, "ui", "    health: {path: /h, interval: 20ms}\n    min_refresh: 1ms\n"))
	gw.waitReason(t, "x", appstatus.ReasonProbeFailed)
	gw.waitReason(t, "y", appstatus.ReasonReady)
	token := gw.g.ProbeToken()
	if len(token) < 32 {
		t.Fatalf("probe token %q is too short", token)
	}
	cases := map[string]map[string]string{
		"right value":        {"X-Wakegate-Probe": token},
		"wrong value":        {"X-Wakegate-Probe": "nope"},
		"lower-case name":    {"x-wakegate-probe": token},
		"upper-case name":    {"X-WAKEGATE-PROBE": token},
		"repeated with more": {"X-Wakegate-Probe": token + ", " + token},
	}
	before := len(x.seenHeaders())
	for name, hdr := range cases {
		code, reason, body := gw.get(t, "/apps/x/other", hdr)
		if code != http.StatusServiceUnavailable || reason != appstatus.ReasonProbeFailed {
			t.Errorf("%s: candidate answered %d %q %s; want 503 probe-failed", name, code, reason, body)
		}
		if code, _, body := gw.get(t, "/apps/y/other", hdr); code != http.StatusOK {
			t.Errorf("%s: published app answered %d %s", name, code, body)
		}
	}
	for _, h := range x.seenHeaders()[before:] {
		if h.Get("X-Forwarded-For") != "" && h.Get("User-Agent") != "wakegate-self-probe" {
			t.Errorf("an outside request reached the candidate's upstream: %v", h)
		}
	}
	for name, u := range map[string]*testUpstream{"x": x, "y": y} {
		seen := u.seenHeaders()
		if len(seen) == 0 {
			t.Fatalf("%s saw no request", name)
		}
		for _, h := range seen {
			for k := range h {
				if strings.EqualFold(k, gateway.ProbeHeader) {
					t.Errorf("upstream %s got the probe header: %v", name, h)
				}
			}
		}
	}
}

func TestAppStatusRulesByKind(t *testing.T) {
	up := newTestUpstream(t, "/h", statusHandler(http.StatusUnauthorized))
	gw := startAppGateway(t, "apps:\n"+appEntry("api", up.URL, "api", "    health: {path: /h, interval: 20ms}\n    min_refresh: 1ms\n")+
		appEntry("ui", up.URL, "ui", "    health: {path: /h, interval: 20ms}\n    min_refresh: 1ms\n"))
	if st := gw.waitReason(t, "api", appstatus.ReasonReady); st.Route != appstatus.RoutePublished || st.ProbeStatus != 401 {
		t.Fatalf("API app answering 401: %+v; want ready and published", st)
	}
	st := gw.waitReason(t, "ui", appstatus.ReasonUnhealthy)
	if st.Phase == appstatus.PhaseReady || st.Route != appstatus.RouteCandidate || !strings.Contains(st.Message, "401") {
		t.Fatalf("UI app answering 401: %+v; want not ready", st)
	}
	for _, code := range []int{400, 404, 500, 503} {
		for _, api := range []bool{false, true} {
			if probe.StatusPasses(code, api) {
				t.Errorf("status %d passes (api %v)", code, api)
			}
		}
	}
}

func TestAppStartPeriod(t *testing.T) {
	up := newTestUpstream(t, "/h", statusHandler(http.StatusInternalServerError))
	gw := startAppGateway(t, "apps:\n"+appEntry("grace", up.URL, "ui", "    health: {path: /h, interval: 20ms, start_period: 1h}\n")+
		appEntry("nograce", up.URL, "ui", "    health: {path: /h, interval: 20ms}\n"))
	if st := gw.waitReason(t, "grace", appstatus.ReasonHealthStarting); st.Phase != appstatus.PhaseStarting {
		t.Fatalf("unhealthy inside the start period: %+v; want starting", st)
	}
	if st := gw.waitReason(t, "nograce", appstatus.ReasonUnhealthy); st.Phase != appstatus.PhaseFailed || !strings.Contains(st.Message, "500") {
		t.Fatalf("unhealthy after the start period: %+v; want failed", st)
	}
}

func TestAppConcurrentRefreshesShareOneProbe(t *testing.T) {
	gate := make(chan struct{})
	up := newTestUpstream(t, "/h", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		statusHandler(http.StatusOK)(w, r)
	})
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "api", "    health: {path: /h, interval: 1h, timeout: 30s}\n    min_refresh: 1h\n"))
	const n = 50
	var started, wg sync.WaitGroup
	started.Add(n)
	results := make(chan appstatus.Status, n)
	for range n {
		wg.Go(func() {
			started.Done()
			st, err := gw.g.Apps().Refresh(context.Background(), "x", "")
			if err != nil {
				t.Error(err)
			}
			results <- st
		})
	}
	started.Wait()
	testbin.Eventually(t, "the first health check to arrive", func() bool { return len(up.seenHeaders()) > 0 })
	close(gate)
	wg.Wait()
	close(results)
	for st := range results {
		if st.Phase != appstatus.PhaseReady {
			t.Errorf("a refresh returned %+v", st)
		}
	}
	if h, p := up.health.Load(), up.probes.Load(); h != 1 || p != 1 {
		t.Fatalf("%d concurrent refreshes made %d health checks and %d self-probes; want 1 and 1", n, h, p)
	}
}

func TestAppRefreshTimeoutReturnsLastStatus(t *testing.T) {
	up := newTestUpstream(t, "/h", statusHandler(http.StatusOK))
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "api", "    health: {path: /h, interval: 1h, timeout: 1h}\n    min_refresh: 1ms\n    refresh_timeout: 200ms\n"))
	ready := gw.waitReason(t, "x", appstatus.ReasonReady)
	release := make(chan struct{})
	defer close(release)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		select { // hangs far past refresh_timeout
		case <-release:
		case <-r.Context().Done():
		}
	})
	guard, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	st, err := gw.g.Apps().RefreshSince(guard, "x", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if guard.Err() != nil {
		t.Fatal("the refresh was not bounded by refresh_timeout")
	}
	if !st.Stale || st.Phase != appstatus.PhaseReady || !st.ObservedAt.Equal(ready.ObservedAt) {
		t.Fatalf("timed-out refresh returned %+v; want the last stored status %+v, marked stale", st, ready)
	}
}

// appEvents collects app x's events from sub until want of them arrived.
func appEvents(t *testing.T, sub *events.Subscription, app string, want int) []string {
	t.Helper()
	var out []string
	deadline := time.After(testbin.WaitLimit)
	for len(out) < want {
		select {
		case e := <-sub.C:
			if e.App != app {
				continue
			}
			s := e.Type
			if e.Type == events.AppPhase {
				s += " " + e.Phase + "/" + e.Reason
			}
			out = append(out, s)
		case <-deadline:
			t.Fatalf("events so far %q; want %d", out, want)
		}
	}
	return out
}

func TestAppUnpublishedAfterFailuresAndRepublished(t *testing.T) {
	up := newTestUpstream(t, "/h", statusHandler(http.StatusOK))
	gw := startAppGateway(t, "apps:\n"+appEntry("x", up.URL, "api", "    health: {path: /h, interval: 1h}\n    min_refresh: 1h\n    failure_threshold: 3\n"))
	gw.waitReason(t, "x", appstatus.ReasonReady)
	sub := gw.g.Engine().Events().Subscribe(64)
	defer sub.Close()
	observe := func() appstatus.Status {
		st, err := gw.g.Apps().RefreshSince(context.Background(), "x", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	up.stop()
	for i := 1; i <= 3; i++ {
		st := observe()
		want := appstatus.RoutePublished
		if i == 3 {
			want = appstatus.RouteCandidate
		}
		if st.Reason != appstatus.ReasonEndpointNotReady || st.Route != want {
			t.Fatalf("observation %d of a dead upstream: %+v; want endpoint-not-ready with route %s", i, st, want)
		}
	}
	code, reason, body := gw.get(t, "/apps/x/y", nil)
	if code != http.StatusServiceUnavailable || reason != appstatus.ReasonEndpointNotReady {
		t.Fatalf("unpublished app answered %d %q", code, reason)
	}
	// The caller learns the phase and a sentence; the upstream's address
	// and the dial error go to the log, with the request id.
	_, port, _ := net.SplitHostPort(up.addr)
	if !strings.Contains(body, `"code":"app_starting"`) || strings.Contains(body, port) || strings.Contains(body, "dial") {
		t.Fatalf("public body %s: want app_starting without the upstream's port or the dial error", body)
	}
	var answer struct {
		Error struct {
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Error.RequestID == "" {
		t.Fatalf("public body %s: want a request id (%v)", body, err)
	}
	testbin.Eventually(t, "the cause logged with the request id", func() bool {
		for _, line := range gw.logs.Lines(`"request failed"`) {
			if strings.Contains(line, "request_id="+answer.Error.RequestID) && strings.Contains(line, port) &&
				strings.Contains(line, "endpoint-not-ready") {
				return true
			}
		}
		return false
	})
	up.restart(t)
	if st := observe(); st.Phase != appstatus.PhaseReady || st.Route != appstatus.RoutePublished {
		t.Fatalf("recovered upstream: %+v; want ready and published again", st)
	}
	got := appEvents(t, sub, "x", 4)
	want := []string{"app.phase starting/endpoint-not-ready", events.RouteWithdrawn, events.RoutePublished, "app.phase ready/ready"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events %q; want %q", got, want)
	}
}

func TestAppInSleepingHome(t *testing.T) {
	gw := startAppGateway(t, `wake:
  hold: 0s
  idle_timeout: 300ms
homes:
  - id: demo
    target: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
    health: {interval: 20ms}
    min_refresh: 1ms
`)
	st := gw.waitReason(t, "demo", appstatus.ReasonHomeSleeping)
	if st.Phase != appstatus.PhaseStarting || st.Route != appstatus.RouteCandidate {
		t.Fatalf("sleeping home: %+v", st)
	}
	// A browser gets the waiting page at once (hold 0s); the page's poll
	// says ready only once the route is published.
	code, _, body := gw.get(t, "/apps/demo/", map[string]string{"Accept": "text/html"})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "/_wakegate/wake/app/demo") {
		t.Fatalf("browser: %d %s; want the waiting page", code, body)
	}
	testbin.Eventually(t, "the waiting page's poll to say ready", func() bool {
		_, _, body := gw.get(t, "/_wakegate/wake/app/demo", nil)
		return strings.Contains(body, `"ready":true`)
	})
	if st := gw.status(t, "demo"); st.Route != appstatus.RoutePublished {
		t.Fatalf("poll said ready with route %s", st.Route)
	}
	code, _, body = gw.get(t, "/apps/demo/whoami", nil)
	if code != http.StatusOK || !strings.Contains(body, `"path":"/apps/demo/whoami"`) {
		t.Fatalf("API request: %d %s", code, body)
	}
	// Self-probes count no session: the home still goes idle, and the app
	// is presented as sleeping and unpublished again.
	testbin.Eventually(t, "the home to be suspended and the route withdrawn", func() bool {
		st := gw.status(t, "demo")
		return st.Reason == appstatus.ReasonHomeSleeping && st.Route == appstatus.RouteCandidate
	})
	// An API request wakes it again and is answered once a self-probe of
	// the woken home passed.
	code, _, body = gw.get(t, "/apps/demo/whoami", nil)
	if code != http.StatusOK {
		t.Fatalf("API request to the sleeping app: %d %s", code, body)
	}
	if st := gw.status(t, "demo"); st.Route != appstatus.RoutePublished {
		t.Fatalf("answered while the route is %s", st.Route)
	}
}

// TestAppRoutePendingUntilServe: a gateway that does not listen yet has no
// route an app's self-probe could take, whatever the app's own health; the
// same app is ready once the gateway serves.
func TestAppRoutePendingUntilServe(t *testing.T) {
	up := newTestUpstream(t, "/h", statusHandler(http.StatusOK))
	before := goleak.IgnoreCurrent()
	cfg, err := all.Load("pending.yaml", []byte(fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
log: {access: false}
apps:
  - slug: x
    upstream: %s
    kind: api
    strip_prefix: true
    health: {path: /h, interval: 1h}
    min_refresh: 1ms
`, filepath.Join(t.TempDir(), "data"), up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Last: once the gateway is closed, none of its goroutines (app loops,
	// observations, self-probe connections) is left.
	defer func() {
		g.Close()
		if err := goleak.Find(before); err != nil {
			t.Error(err)
		}
	}()
	st, err := g.Apps().RefreshSince(context.Background(), "x", time.Now())
	if err != nil || st.Phase != appstatus.PhaseStarting || st.Reason != appstatus.ReasonRoutePending {
		t.Fatalf("before Serve: %+v, %v; want starting/route-pending", st, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	testbin.Eventually(t, "the app is ready once the gateway serves", func() bool {
		st, _ = g.Apps().RefreshSince(context.Background(), "x", time.Now())
		return st.Phase == appstatus.PhaseReady
	})
}
