package control

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// testRoute is the table's entry in these tests: the contract the request
// path's route.App fulfils, with nothing else.
type testRoute struct {
	cfg       registry.App
	gen       uint64
	published atomic.Bool
	pulse     atomic.Pointer[appstatus.Pulse]
}

func (r *testRoute) Config() *registry.App       { return &r.cfg }
func (r *testRoute) Prefix() string              { return "/apps/" + r.cfg.Slug }
func (r *testRoute) Generation() uint64          { return r.gen }
func (r *testRoute) HomeID() string              { return "" }
func (r *testRoute) Published() bool             { return r.published.Load() }
func (r *testRoute) SetPublished(on bool) bool   { return r.published.Swap(on) }
func (r *testRoute) SetPulse(p *appstatus.Pulse) { r.pulse.Store(p) }

// testMaker builds the table's entries.
type testMaker struct{}

func (testMaker) NewApp(ac registry.App, gen uint64) *testRoute { return &testRoute{cfg: ac, gen: gen} }

type notDraining struct{}

func (notDraining) Draining() bool { return false }

// listener is a real loopback server standing in for the gateway's public
// listener: a request the prober admits (its own connection, its token)
// gets the status in own; any other request, with the token or not, is
// an upstream's and gets 200 (the app's health check).
type listener struct {
	url     string
	own     atomic.Int32 // status for the prober's own requests
	admits  atomic.Int32 // requests admitted as the prober's own
	leaked  atomic.Int32 // requests that still carried the probe header after Admit
	lastOwn atomic.Pointer[string]
}

func startListener(t *testing.T, p *SelfProber) *listener {
	t.Helper()
	l := &listener{}
	l.own.Store(http.StatusOK)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own := p.Admit(r)
		if r.Header.Get(ProbeHeader) != "" {
			l.leaked.Add(1)
		}
		if !own {
			w.WriteHeader(http.StatusOK)
			return
		}
		l.admits.Add(1)
		path := r.URL.Path
		l.lastOwn.Store(&path)
		w.WriteHeader(int(l.own.Load()))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.Listening(ln.Addr())
	l.url = "http://" + ln.Addr().String()
	return l
}

// newTestTable returns a table over a real bbolt store and engine, its
// prober not listening yet.
func newTestTable(t *testing.T) (*AppTable[*testRoute], *SelfProber) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := wake.New(wake.Options{Store: st, Sessions: sessions.New(), Instance: "test", Log: log, Events: events.NewBus(64)})
	t.Cleanup(e.Close)
	p := NewSelfProber(2 * time.Second)
	tab := NewAppTable(AppTableOptions[*testRoute]{Routes: testMaker{}, Engine: e, Store: st, Instance: "test",
		Prober: p, Draining: notDraining{}, Log: log})
	t.Cleanup(tab.Close)
	return tab, p
}

func testApp(slug, upstream string) registry.App {
	ac := registry.App{Slug: slug, Upstream: upstream, Health: registry.AppHealth{Path: "/health"}}
	ac.Default()
	return ac
}

// TestAppTableOnlyAPassingSelfProbePublishes: an installed app is a
// candidate; a self-probe goes to /apps/{slug}{health.path} through the
// listener on the prober's own connection; a failing status leaves the
// route a candidate, a passing one publishes it, and Withdraw takes it
// back. Before the gateway listens there is no route state and no probe.
func TestAppTableOnlyAPassingSelfProbePublishes(t *testing.T) {
	tab, p := newTestTable(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tab.Lock()
	tab.Install(testApp("docs", "http://127.0.0.1:1"), 0)
	tab.Unlock()
	if _, ok := tab.RouteState("docs"); ok {
		t.Fatal("a route state before the gateway listens")
	}
	if _, err := tab.SelfProbe(ctx, "docs"); err == nil {
		t.Fatal("a self-probe passed before the gateway listens")
	}

	l := startListener(t, p)
	if st, ok := tab.RouteState("docs"); !ok || st != appstatus.RouteCandidate {
		t.Fatalf("route state %q, %v; want a candidate", st, ok)
	}
	l.own.Store(http.StatusNotFound)
	if code, err := tab.SelfProbe(ctx, "docs"); err == nil || code != http.StatusNotFound {
		t.Fatalf("self-probe answered 404: code %d, err %v; want a failure with 404", code, err)
	}
	if tab.Published("docs") {
		t.Fatal("a 404 published the route")
	}
	l.own.Store(http.StatusOK)
	if code, err := tab.SelfProbe(ctx, "docs"); err != nil || code != http.StatusOK {
		t.Fatalf("self-probe answered 200: code %d, err %v", code, err)
	}
	if got := *l.lastOwn.Load(); got != "/apps/docs/health" {
		t.Errorf("self-probe path %q, want /apps/docs/health", got)
	}
	if st, _ := tab.RouteState("docs"); st != appstatus.RoutePublished || !tab.Published("docs") {
		t.Fatalf("route state %q after a passing self-probe; want published", st)
	}
	if l.admits.Load() != 2 || l.leaked.Load() != 0 {
		t.Errorf("admitted %d self-probes (want 2), %d kept the probe header", l.admits.Load(), l.leaked.Load())
	}

	tab.Withdraw("docs", appstatus.ReasonStopped)
	if tab.Published("docs") {
		t.Fatal("still published after Withdraw")
	}
	// A replaced app is a candidate again, whatever its predecessor was.
	if _, err := tab.SelfProbe(ctx, "docs"); err != nil {
		t.Fatal(err)
	}
	tab.Lock()
	tab.Install(testApp("docs", "http://127.0.0.1:2"), 7)
	tab.Unlock()
	if tab.Published("docs") {
		t.Fatal("a replaced app kept its predecessor's publication")
	}
	if gen, ok := tab.Generation("docs"); !ok || gen != 7 {
		t.Fatalf("generation %d, %v; want 7", gen, ok)
	}
}

// TestSelfProberAdmitsOnlyItsOwnConnections: the probe token sent by any
// other client, on loopback too, is an ordinary header that is removed,
// and a request on the prober's connection without the right token is not
// admitted either.
func TestSelfProberAdmitsOnlyItsOwnConnections(t *testing.T) {
	p := NewSelfProber(2 * time.Second)
	defer p.Close()
	l := startListener(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.url+"/apps/x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ProbeHeader, p.Token())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if l.admits.Load() != 0 || l.leaked.Load() != 0 {
		t.Fatalf("an outside caller with the token: admitted %d, header kept %d", l.admits.Load(), l.leaked.Load())
	}

	// The prober's own request, with its token, is admitted.
	if code, err := p.get(ctx, "/apps/x/"); err != nil || code != http.StatusOK {
		t.Fatalf("own self-probe: %d, %v", code, err)
	}
	if l.admits.Load() != 1 {
		t.Fatalf("own self-probe admitted %d times, want 1", l.admits.Load())
	}

	// A request without the header is untouched and not admitted.
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "127.0.0.1:1"
	if p.Admit(r) {
		t.Fatal("a request without the probe header was admitted")
	}
	// Two values of the header are never admitted.
	r.Header[ProbeHeader] = []string{p.Token(), p.Token()}
	if p.Admit(r) || r.Header.Get(ProbeHeader) != "" {
		t.Fatal("a request with two probe headers was admitted or kept them")
	}
}

// TestAppTableLoopsFollowInstallsAndTheOwner: Run starts a loop for every
// app (its observation self-probes the app), an app installed later gets
// its own, Uninstall removes the route and stops observing, and Run
// returns once its context ends.
func TestAppTableLoopsFollowInstallsAndTheOwner(t *testing.T) {
	tab, p := newTestTable(t)
	l := startListener(t, p)
	tab.Lock()
	tab.Install(testApp("one", l.url), 0)
	tab.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tab.Run(ctx)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}()

	// A publication is an event about the app: look again at each.
	waitPublished := func(slug string) {
		t.Helper()
		timeout := time.NewTimer(20 * time.Second)
		defer timeout.Stop()
		for {
			changed := tab.events.Changed(slug)
			if tab.Published(slug) {
				return
			}
			select {
			case <-changed:
			case <-timeout.C:
				st, _ := tab.Observer().Status(slug)
				t.Fatalf("%s not published by its loop: %+v", slug, st)
			}
		}
	}
	waitPublished("one")
	tab.Lock()
	tab.Install(testApp("two", l.url), 0)
	tab.Unlock()
	waitPublished("two")

	if routes := tab.Routes(); len(routes) != 2 {
		t.Fatalf("routes %+v, want two", routes)
	}
	tab.Lock()
	tab.Uninstall("one")
	tab.Unlock()
	if _, ok := tab.Lookup("one"); ok {
		t.Fatal("an uninstalled app is still routed")
	}
	if _, ok := tab.Observer().Status("one"); ok {
		t.Fatal("an uninstalled app is still observed")
	}
	if slugs := tab.Generations(); len(slugs) != 1 {
		t.Fatalf("generations %v, want only two", slugs)
	}
}
