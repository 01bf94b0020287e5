package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
)

// rtUpstream is a real loopback upstream that counts requests per path and
// answers 503 on a health path until it is opened.
type rtUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	open atomic.Bool
}

func rtNewUpstream(t *testing.T) *rtUpstream {
	u := &rtUpstream{hits: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.hits[r.URL.Path]++
		if r.Header.Get("X-Forwarded-For") != "" {
			u.hits["via gateway "+r.URL.Path]++ // a self-probe or a user's request
		}
		u.mu.Unlock()
		if strings.Contains(r.URL.Path, "/gated") && !u.open.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *rtUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[path]
}

// rtAppView is the part of the admin API's app answer the tests read.
type rtAppView struct {
	Slug, Kind, Phase, Reason, Route, Source string
	Generation                               uint64
}

// TestRuntimeAppRegistry registers an app through the admin API and
// follows it: bad fields named, 503 with its phase until its self-probe
// passes, then 200; a stale If-Match refused; a replace that starts over as
// a candidate; a delete after which the app is 404 and its observation
// loop no longer reaches its upstream. Readers hammer the route table
// throughout (for the race detector).
func TestRuntimeAppRegistry(t *testing.T) {
	t.Parallel()
	up := rtNewUpstream(t)
	up.open.Store(false)
	a := admStart(t, admDemo, "")
	pub := e2eClient(t)
	appURL := "http://" + a.addr + "/apps/live/x"

	// Bad fields are all named, with the config's rules.
	code, _, body := a.do(t, "PUT", "/admin/apps/live", admToken, nil, map[string]any{
		"home": "nobody", "kind": "web", "path": "relative", "desired_state": "asleep", "failure_threshold": -2,
		"min_refresh": "-1s", "health": map[string]any{"type": "udp", "path": "nope", "interval": "-2s"}})
	e := admDecode[admErr](t, body)
	var fields []string
	for _, f := range e.Error.Fields {
		fields = append(fields, f.Field)
	}
	slices.Sort(fields)
	want := []string{"desired_state", "failure_threshold", "health.interval", "health.path", "health.type", "home", "kind", "min_refresh", "path"}
	if code != http.StatusBadRequest || e.Error.Code != "invalid" || !slices.Equal(fields, want) {
		t.Fatalf("bad app: %d %s\nfields %v, want %v", code, body, fields, want)
	}
	// A value that is no duration at all is named by its field; so is a
	// number without a unit.
	for _, bad := range []map[string]any{{"min_refresh": "soon"}, {"health": map[string]any{"interval": 2}}} {
		bad["upstream"] = up.URL
		code, _, body := a.do(t, "PUT", "/admin/apps/live", admToken, nil, bad)
		e := admDecode[admErr](t, body)
		if code != http.StatusBadRequest || (e.Error.Field != "min_refresh" && e.Error.Field != "health.interval") ||
			!strings.Contains(e.Error.Message, "want a duration such as 2s") {
			t.Fatalf("bad duration %v: %d %s", bad, code, body)
		}
	}
	// The fields the gateway keeps are not the caller's.
	code, _, body = a.do(t, "PUT", "/admin/apps/live", admToken, nil, map[string]any{"upstream": up.URL, "generation": 4, "slug": "other"})
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "slug,generation" {
		t.Fatalf("gateway-kept fields: %d %s", code, body)
	}
	if code, _, body := a.do(t, "PUT", "/admin/apps/Bad_Slug", admToken, nil, map[string]any{"upstream": up.URL}); code != http.StatusBadRequest ||
		admDecode[admErr](t, body).Error.Field != "slug" {
		t.Fatalf("bad slug: %d %s", code, body)
	}
	if code, _, body := a.do(t, "PUT", "/admin/apps/live", admToken, nil, map[string]any{"upstream": up.URL, "colour": "red"}); code != http.StatusBadRequest ||
		admDecode[admErr](t, body).Error.Field != "colour" {
		t.Fatalf("unknown field: %d %s", code, body)
	}
	if code, _, body := a.do(t, "PUT", "/admin/apps/demo", admToken, nil, map[string]any{"upstream": up.URL}); code != http.StatusConflict ||
		admDecode[admErr](t, body).Error.Code != "config_app" {
		t.Fatalf("replace a config app: %d %s", code, body)
	}
	if code, _, body := a.do(t, "GET", "/admin/apps/live", admToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("a refused app exists: %d %s", code, body)
	}

	// Readers of the route table run through every change below.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res, err := pub.Get(appURL); err == nil {
					res.Body.Close()
				}
				a.g.Routes()
			}
		})
	}
	defer func() {
		close(stop)
		readers.Wait()
	}()

	// A control app on the same upstream: its health checks pace the
	// check that the deleted app's loop is gone.
	if code, _, body := a.do(t, "PUT", "/admin/apps/ctl", admToken, nil, map[string]any{"upstream": up.URL, "min_refresh": "10ms",
		"health": map[string]any{"path": "/ctl", "interval": "20ms"}}); code != http.StatusCreated {
		t.Fatalf("register ctl: %d %s", code, body)
	}

	spec := map[string]any{"upstream": up.URL, "kind": "api", "min_refresh": "10ms",
		"health": map[string]any{"path": "/gated/a", "interval": "20ms", "start_period": "1h"}}
	code, hdr, body := a.do(t, "PUT", "/admin/apps/live", admToken, nil, spec)
	v := admDecode[rtAppView](t, body)
	if code != http.StatusCreated || hdr.Get("ETag") != `"1"` || v.Source != "api" || v.Generation != 1 || v.Route != "candidate" || v.Kind != "api" {
		t.Fatalf("register: %d %v %s", code, hdr, body)
	}
	// Unhealthy inside its start period: 503 with the phase, never 200.
	res, body := e2eGet(t, pub, appURL, nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("X-Wakegate-App-Phase") != string(appstatus.PhaseStarting) ||
		res.Header.Get("X-Wakegate-App-Reason") != appstatus.ReasonHealthStarting {
		t.Fatalf("before the app is healthy: %d %v %s", res.StatusCode, res.Header, body)
	}
	if n := up.count("/apps/live/x"); n != 0 {
		t.Fatalf("user requests reached the candidate: %d", n)
	}
	up.open.Store(true)
	testbin.Eventually(t, "the registered app answers 200", func() bool {
		res, body := e2eGet(t, pub, appURL, nil)
		return res.StatusCode == http.StatusOK && string(body) == "upstream /apps/live/x"
	})
	if n := up.count("via gateway /apps/live/gated/a"); n == 0 {
		t.Fatal("the route was published without a self-probe through the gateway")
	}
	_, _, body = a.do(t, "GET", "/admin/apps/live", admToken, nil, nil)
	if v := admDecode[rtAppView](t, body); v.Phase != "ready" || v.Route != "published" {
		t.Fatalf("published app: %s", body)
	}
	rtWantEvents(t, a, "live", events.AppRegistered, events.AppPhase, events.RoutePublished)

	// Replace: a stale If-Match is refused and changes nothing.
	spec["health"] = map[string]any{"path": "/gated/b", "interval": "20ms"}
	if code, _, body := a.do(t, "PUT", "/admin/apps/live", admToken, map[string]string{"If-Match": `"7"`}, spec); code != http.StatusConflict ||
		admDecode[admErr](t, body).Error.Field != "If-Match" {
		t.Fatalf("stale If-Match: %d %s", code, body)
	}
	up.open.Store(false)
	code, hdr, body = a.do(t, "PUT", "/admin/apps/live", admToken, map[string]string{"If-Match": `"1"`}, spec)
	if v := admDecode[rtAppView](t, body); code != http.StatusOK || hdr.Get("ETag") != `"2"` || v.Route != "candidate" {
		t.Fatalf("replace: %d %v %s", code, hdr, body)
	}
	if res, body := e2eGet(t, pub, appURL, nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the replaced app is served before its self-probe: %d %s", res.StatusCode, body)
	}
	up.open.Store(true)
	testbin.Eventually(t, "the replaced app answers 200", func() bool {
		res, _ := e2eGet(t, pub, appURL, nil)
		return res.StatusCode == http.StatusOK
	})
	testbin.Eventually(t, "the replaced app's loop checks its new path", func() bool { return up.count("/apps/live/gated/b") > 0 })
	// The old loop ended with the replace: its path is no longer checked.
	oldHits := up.count("/apps/live/gated/a")
	rtWaitTicks(t, up, "/apps/ctl/ctl", 3)
	if n := up.count("/apps/live/gated/a"); n != oldHits {
		t.Fatalf("the replaced app's old health path was checked %d more times", n-oldHits)
	}

	// Delete: stale If-Match refused; then 404 and no more health checks.
	if code, _, body := a.do(t, "DELETE", "/admin/apps/live", admToken, map[string]string{"If-Match": `"1"`}, nil); code != http.StatusConflict {
		t.Fatalf("delete with a stale If-Match: %d %s", code, body)
	}
	if code, _, body := a.do(t, "DELETE", "/admin/apps/demo", admToken, nil, nil); code != http.StatusConflict {
		t.Fatalf("delete a config app: %d %s", code, body)
	}
	if code, _, body := a.do(t, "DELETE", "/admin/apps/live", admToken, map[string]string{"If-Match": `"2"`}, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _, body := a.do(t, "GET", "/admin/apps/live", admToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("deleted app: %d %s", code, body)
	}
	if res, body := e2eGet(t, pub, appURL, nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("deleted app on the public listener: %d %s", res.StatusCode, body)
	}
	if code, _, body := a.do(t, "DELETE", "/admin/apps/live", admToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("delete twice: %d %s", code, body)
	}
	rtWaitTicks(t, up, "/apps/ctl/ctl", 1) // a stray request already on the wire lands
	gone := up.count("/apps/live/gated/b")
	rtWaitTicks(t, up, "/apps/ctl/ctl", 3)
	if n := up.count("/apps/live/gated/b"); n != gone {
		t.Fatalf("the deleted app's health path was checked %d more times", n-gone)
	}
	for _, r := range a.g.Routes() {
		if r.Slug == "live" {
			t.Fatal("the deleted app is still in the route table")
		}
	}
	rtWantEvents(t, a, "live", events.RouteWithdrawn, events.AppRemoved)
	// The phase gauge counts the two apps left (demo and ctl).
	testbin.Eventually(t, "wakegate_app_phase to count two apps", func() bool {
		return admValue(a.scrape(t), "wakegate_app_phase", nil) == 2
	})
}

// rtWaitTicks waits until the upstream saw n more requests at path.
func rtWaitTicks(t *testing.T, up *rtUpstream, path string, n int) {
	t.Helper()
	start := up.count(path)
	testbin.Eventually(t, fmt.Sprintf("%d more requests at %s", n, path), func() bool { return up.count(path) >= start+n })
}

// rtWantEvents checks the event bus remembers events of these types for
// app, in this order (other events may come between).
func rtWantEvents(t *testing.T, a *admGateway, app string, types ...string) {
	t.Helper()
	var seen []string
	for _, ev := range a.g.Engine().Events().Recent() {
		if ev.App == app {
			seen = append(seen, ev.Type)
		}
	}
	i := 0
	for _, typ := range seen {
		if i < len(types) && typ == types[i] {
			i++
		}
	}
	if i < len(types) {
		t.Fatalf("events of %s: %v, want %v in order", app, seen, types)
	}
}

// TestRuntimeHomeRestartHistory kills a home's process and reads the
// supervisor's restart in GET /admin/homes/{id}.
func TestRuntimeHomeRestartHistory(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	type restart struct {
		OldPID     int    `json:"old_pid"`
		NewPID     int    `json:"new_pid"`
		ExitReason string `json:"exit_reason"`
		Outcome    string `json:"outcome"`
		Time       time.Time
	}
	type homeView struct {
		Restarts []restart `json:"restarts"`
	}
	_, _, body := a.do(t, "GET", "/admin/homes/demo", admToken, nil, nil)
	if h := admDecode[homeView](t, body); len(h.Restarts) != 0 {
		t.Fatalf("restarts before any exit: %s", body)
	}
	pids := testbin.HomePIDs(t, filepath.Join(a.data, "homes", "demo"))
	if len(pids) != 1 {
		t.Fatalf("home processes: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var got []restart
	testbin.Eventually(t, "a restart in the home's history", func() bool {
		_, _, body := a.do(t, "GET", "/admin/homes/demo", admToken, nil, nil)
		got = admDecode[homeView](t, body).Restarts
		return len(got) > 0
	})
	r := got[0]
	if len(got) != 1 || r.OldPID != pids[0] || r.NewPID == 0 || r.NewPID == pids[0] || r.ExitReason != "signal: killed" ||
		r.Outcome != "restarted" || r.Time.IsZero() {
		t.Fatalf("restart history %+v, want one restart of pid %d", got, pids[0])
	}
	testbin.Eventually(t, "the new process runs", func() bool {
		now := testbin.HomePIDs(t, filepath.Join(a.data, "homes", "demo"))
		return len(now) == 1 && now[0] == r.NewPID
	})
}

// TestRuntimeRestartKeepsRegistrations registers homes and an app through
// the admin API of the real binary, restarts the gateway on the same data
// dir, and checks the restarted one serves them again (adopting the home
// left running), while homes of its config win over stored dynamic ones
// with the same id or target.
func TestRuntimeRestartKeepsRegistrations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	base := fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log:
  access: false
wake:
  idle_timeout: 0s
exec:
  keep_running_on_shutdown: true
admin:
  listen: %q
  tokens: [%q]
homes:
  - id: cfg
`, adminAddr, admToken)
	adm := &admGateway{admin: "http://" + adminAddr, client: e2eClient(t)}
	pub := e2eClient(t)

	p1 := testbin.ServeIn(t, dir, base)
	for id, target := range map[string]string{"dyn": "dyn", "clash": "clash", "tclash": "tc"} {
		if code, _, body := adm.do(t, "PUT", "/admin/homes/"+id, admToken, nil, map[string]any{"target": target, "idle_timeout": "0s"}); code != http.StatusCreated {
			t.Fatalf("register home %s: %d %s", id, code, body)
		}
	}
	_, _, body := adm.do(t, "GET", "/admin/homes/dyn", admToken, nil, nil)
	if h := admDecode[struct{ Dynamic bool }](t, body); !h.Dynamic {
		t.Fatalf("registered home not dynamic: %s", body)
	}
	if code, _, body := adm.do(t, "PUT", "/admin/apps/dynapp", admToken, nil, map[string]any{"home": "dyn", "path": "/apps/demo",
		"strip_prefix": true, "min_refresh": "10ms", "health": map[string]any{"interval": "50ms"}}); code != http.StatusCreated {
		t.Fatalf("register app: %d %s", code, body)
	}
	_, w, _ := e2eGetWhoami(t, pub, "http://"+p1.Addr+"/apps/dynapp/whoami", nil)
	if w.Path != "/apps/demo/whoami" {
		t.Fatalf("app before the restart: %+v", w)
	}
	homeDir := filepath.Join(dir, "data", "homes", "dyn")
	pids := testbin.HomePIDs(t, homeDir)
	if len(pids) != 1 {
		t.Fatalf("dyn processes %v, want one", pids)
	}
	p1.Stop()

	// The config now declares a home with the id of one dynamic home and
	// one with the target of another.
	p2 := testbin.ServeIn(t, dir, base+"  - id: clash\n    target: cfgclash\n  - id: other\n    target: tc\n")
	_, w, _ = e2eGetWhoami(t, pub, "http://"+p2.Addr+"/apps/dynapp/whoami", nil)
	if w.Path != "/apps/demo/whoami" {
		t.Fatalf("app after the restart: %+v", w)
	}
	_, w, _ = e2eGetWhoami(t, pub, "http://"+p2.Addr+"/node/dyn/whoami", nil)
	if got := testbin.HomePIDs(t, homeDir); len(got) != 1 || got[0] != pids[0] {
		t.Fatalf("dyn processes %v after the restart, want the adopted %d", got, pids[0])
	}
	code, hdr, body := adm.do(t, "GET", "/admin/apps/dynapp", admToken, nil, nil)
	if v := admDecode[rtAppView](t, body); code != http.StatusOK || v.Source != "api" || v.Generation != 1 || hdr.Get("ETag") != `"1"` || v.Route != "published" {
		t.Fatalf("restored app: %d %v %s", code, hdr, body)
	}
	_, _, body = adm.do(t, "GET", "/admin/homes/dyn", admToken, nil, nil)
	if h := admDecode[struct {
		Dynamic     bool
		IdleTimeout string `json:"idle_timeout"`
	}](t, body); !h.Dynamic || h.IdleTimeout != "0s" {
		t.Fatalf("restored home: %s", body)
	}
	// Same id: the config's home, no longer dynamic, at the config's target.
	_, _, body = adm.do(t, "GET", "/admin/homes/clash", admToken, nil, nil)
	if h := admDecode[struct {
		Target  string
		Dynamic bool
	}](t, body); h.Target != "cfgclash" || h.Dynamic {
		t.Fatalf("config home with a dynamic home's id: %s", body)
	}
	if res, body := e2eGet(t, pub, "http://"+p2.Addr+"/node/clash/whoami", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the dynamic home's target is served: %d %s", res.StatusCode, body)
	}
	// Same target: the config's home serves it; the dynamic one is not.
	if code, _, body := adm.do(t, "GET", "/admin/homes/tclash", admToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("dynamic home with a config home's target: %d %s", code, body)
	}
	if code, _, body := adm.do(t, "GET", "/admin/homes/other", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("config home: %d %s", code, body)
	}
	out := p2.Output()
	for _, want := range []string{`home=clash`, `home=tclash`} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "the config wins") && strings.Contains(line, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no log line says the config won over %s:\n%s", want, out)
		}
	}
}
