// Package gateway assembles wakegate from a loaded config (package
// config): listeners, hygiene and the router, the wake engine and the
// proxy, the request path (route.Path) over the home and app tables,
// reloads, and the shutdown order.
//
// DESIGN rules that live here: 20 (the shutdown order) and 21 (canonical
// paths, in hygiene), with the listener's part of 14 (apptable.go marks a
// request the self-prober proved it sent, so that only it reaches a
// candidate route). reload.go keeps the order of a reload; its checks
// (30's reload part) live in config and what it applies in control. The
// request path's rules (2, 7, 23, 25, 27, 31's request part) live in
// route; 24 lives in edge; 14's table and prober, 15, 28 and the store's
// part of 30 in control, whose fleet loop the gateway starts with its
// background work (step 5 stops it); the config's checks and warnings
// live in config.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/h1serve"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/certstore"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/route"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/telemetry"
	"github.com/wakegate/wakegate/tlsfront"
	"github.com/wakegate/wakegate/wake"
	"github.com/wakegate/wakegate/webhook"
)

// ProbeHeader carries the internal probe token of the gateway's own
// self-probes. It is stripped from every inbound request.
const ProbeHeader = control.ProbeHeader

// Gateway is one running wakegate.
type Gateway struct {
	// http1 is the public listener's HTTP/1.1 loop while Serve runs
	// without TLS (public.go).
	http1 atomic.Pointer[h1serve.Server]
	cfg   *config.Config
	// live is the config as last reloaded (reload.go), nil before the
	// first reload; conf reads it.
	live atomic.Pointer[config.Config]
	// reloadSrc reads the config file again (SetReloadSource); reloadMu
	// makes reloads run one at a time.
	reloadSrc func() (*config.Config, error)
	reloadMu  sync.Mutex
	log       *slog.Logger
	store     registry.Store
	// fleet is this gateway's part in a fleet sharing its store
	// (control/fleet.go), nil for a gateway on its own store.
	fleet *control.Fleet[*route.Home]
	// providers are the providers this gateway built (providers.go), by
	// name; what only some can do is found by type assertion.
	providers providers
	engine    *wake.Engine
	sessions  *sessions.Table
	proxy     *proxy.Proxy
	homeConns *route.HomeConns // requests forwarded to each home at once (route/homeconns.go)

	homeTab  control.HomeTable[*route.Home]  // homes by target and id (control/hometable.go)
	homeMu   sync.Mutex                      // serialises changes of homeTab
	routeTab *appTable                       // app routes, their observer and the self-probe (apptable.go)
	reg      *control.Registrar[*route.Home] // registers homes and apps (controlplane.go)

	draining atomic.Bool
	// drainStarted is closed when draining starts (waiting streams end).
	drainStarted chan struct{}
	bound        atomic.Pointer[string] // the public listener's address, once serving
	inflight     route.Inflight         // every request being served, WebSockets included (route/inflight.go)
	releases     route.Releases         // what every request gives back when it is over (route/recorder.go)
	reqSeq       atomic.Uint64
	reqPre       string

	// hardStop ends every request's context, with errCut as the cause,
	// when the drain grace is over; it is what closes hijacked WebSocket
	// connections.
	hardStop   context.Context
	hardCancel context.CancelCauseFunc

	handler http.Handler
	addr    chan net.Addr
	// closeWait is afterCloseWait (a field so that a test can shorten it).
	closeWait time.Duration

	metrics     *telemetry.Metrics
	connLimit   *edge.ConnLimit   // open connections per client
	gate        *route.Gate       // access policies and limits (route/access.go)
	denials     *adminapi.Denials // the gate's recent refusals, for the admin API
	path        *route.Path       // the request path of homes and apps (route/)
	admin       *adminServer      // admin.go; nil when the admin listener is off
	adminAddr   chan net.Addr
	adminSocket chan string // holds the admin socket's path once it listens
	started     time.Time
	version     string // reported by the admin API; SetVersion

	// The TLS front door (gateway_tls.go); nil with tls.mode off.
	front      *tlsfront.Front
	decider    *tlsfront.Decider // on_demand only
	httpLn     net.Listener      // UseHTTPListener
	tlsMetrics tlsMetrics        // certs.go

	// The fleet's certificate storage (fleet.go); nil without Redis.
	certStore *certstore.Storage

	// hooks delivers events to the webhooks (webhooks.go); nil without
	// webhooks.
	hooks *webhook.Dispatcher
}

// New builds a gateway from a validated config: it opens the store and the
// providers, starts the engine and registers homes and apps. Close releases
// what New opened.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *Gateway, err error) {
	g := &Gateway{cfg: cfg, log: log, sessions: sessions.New(),
		addr: make(chan net.Addr, 1), adminAddr: make(chan net.Addr, 1), adminSocket: make(chan string, 1),
		started: time.Now(), version: "dev", closeWait: afterCloseWait}
	// g, not the named result: a failed New returns nil, and what it
	// opened is closed here.
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	var b [4]byte
	_, _ = rand.Read(b[:])
	g.reqPre = hex.EncodeToString(b[:]) + "-"
	g.hardStop, g.hardCancel = context.WithCancelCause(context.Background())
	g.drainStarted = make(chan struct{})

	// The data plane exists before the engine, which tells it when a
	// home stops.
	g.proxy = g.newProxy()
	em := telemetry.NewEngine()
	if err := g.openStoreAndProviders(em); err != nil {
		return nil, err
	}
	// The configured roll target is stored before homes register (a home
	// adopted at registration may roll); an equal stored one is kept as is.
	if rt := cfg.Roll.Target; rt.Version != "" {
		if _, err := g.engine.SetTarget(ctx, registry.Target{Version: rt.Version, Command: rt.Command, Image: rt.Image}); err != nil {
			return nil, fmt.Errorf("roll.target: %w", err)
		}
	}
	g.metrics = telemetry.New(em, g.engine, metricState{g})
	// Webhooks hear the events of homes adopted at registration.
	if err := g.startWebhooks(); err != nil {
		return nil, err
	}
	g.connLimit = edge.NewConnLimit(cfg.Server.MaxConnsPerClient, g.clientIP(), g.metrics.ConnsRefused())
	g.releases = route.Releases{Inflight: &g.inflight, Clients: g.connLimit, HardStop: g.hardStop}
	if err := g.newGate(); err != nil {
		return nil, err
	}
	// The app table comes before the registrar that fills it; its
	// routes find their homes when they are installed.
	g.routeTab = newRouteTable(g)
	g.reg = g.newRegistrar()
	if g.fleet != nil {
		g.fleet.Attach(g.engine, g.reg)
	}
	if err := g.reg.RegisterConfigHomes(ctx, cfg.Homes); err != nil {
		return nil, err
	}
	g.homeConns = route.NewHomeConns(cfg.Proxy.MaxConnsPerHome, cfg.Wake.WakeTimeout, cfg.Wake.RetryAfter)
	if err := g.registerBodyBudget(); err != nil {
		return nil, err
	}
	if err := g.metrics.Register(g.homeConns.Collectors()...); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := g.routeTab.LoadStates(ctx); err != nil {
		return nil, err
	}
	g.reg.RegisterConfigApps(cfg.Apps)
	// Homes and apps registered through the admin API, stored, come back
	// after the config's (which win on a conflict; control/registrar.go).
	if err := g.reg.Restore(ctx); err != nil {
		return nil, err
	}
	// What an earlier run of this gateway started and never recorded
	// (it was killed in between) ends, unless a record names it.
	g.engine.EndStrays()
	for _, w := range cfg.FileWarnings() {
		g.log.Warn("config: " + w)
	}
	for _, w := range g.isolationWarnings() { // isolation.go
		g.log.Warn("isolation: " + w)
	}
	g.path = g.newPath()
	g.handler = g.routes()
	if err := g.newFront(); err != nil {
		return nil, err
	}
	return g, nil
}

// openStoreAndProviders opens the embedded store under data_dir (or the
// fleet's), the providers (providers.go), and the wake engine over them,
// counting into em.
func (g *Gateway) openStoreAndProviders(em *telemetry.Engine) error {
	cfg := g.cfg
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if cfg.Redis.Enabled() {
		err = g.openFleetStore()
	} else {
		err = g.openStore(dataDir)
	}
	if err != nil {
		return err
	}
	if err := hideFromOwnUser(); err != nil {
		g.log.Warn("homes of the gateway's user may read its environment in /proc", "err", err)
	}
	g.providers, err = buildProviders(cfg, dataDir, g.log, func(id string, r provider.Result) {
		if g.engine != nil {
			g.engine.ProviderChanged(id, r)
		}
	}, func(id string) bool {
		return g.engine == nil || g.engine.MayRestart(id)
	})
	if err != nil {
		return err
	}
	pc := cfg.Wake.Probe
	var peers ownership.Peers
	var onMissing func(string)
	if g.fleet != nil {
		peers, onMissing = g.fleet.Peers(), g.fleet.Kick
	}
	g.engine = wake.New(wake.Options{
		Store: g.store, Providers: g.providers,
		Sessions: g.sessions, Instance: cfg.Instance,
		WarmTTL: cfg.Wake.WarmTTL, ReadyTimeout: cfg.Wake.ReadyTimeout, RetryAfter: cfg.Wake.RetryAfter,
		MaxConcurrent: cfg.Wake.MaxConcurrent, QueueTimeout: cfg.Wake.WakeTimeout, FailureBackoff: cfg.Wake.FailureBackoff,
		FailureBackoffMax: cfg.Wake.FailureBackoffMax,
		Probe: probe.Spec{Kind: probe.Kind(pc.Kind), Path: pc.Path, AttemptTimeout: pc.AttemptTimeout,
			WSTimeout: pc.WSTimeout,
			Settle:    pc.Settle, MinPause: pc.MinPause, MaxPause: pc.MaxPause, PortWatch: portWatch(pc.PortWatch)},
		RelayHeader: cfg.Proxy.RelayHeader, Log: g.log.With("component", "wake"),
		Events:    events.NewBus(256),
		Roll:      rolls.Options{Mode: rolls.Mode(cfg.Roll.Mode), IdleAfter: cfg.Roll.IdleAfter},
		Metrics:   em,
		AdmitWake: g.admitWake,
		Stopped:   g.homeStopped,
		Peers:     peers,
		OnMissing: onMissing,
		Machine:   control.MachineName(),
	})
	return nil
}

// homeStopped closes the idle upstream connections to a home that has
// just stopped or suspended: the home closed its end, and they would wait
// half-closed for proxy.idle_conn_timeout.
func (g *Gateway) homeStopped(id, endpoint string) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return
	}
	if n := g.proxy.DropIdle(u); n > 0 {
		g.log.Debug("closed idle upstream connections of a stopped home", "home", id, "conns", n)
	}
}

// newProxy builds the data plane from the proxy and server sections.
func (g *Gateway) newProxy() *proxy.Proxy {
	cfg := g.cfg
	trusted := edge.TrustedProxies(cfg.Server.TrustedNets()).Has
	if len(cfg.Server.TrustedNets()) == 0 {
		trusted = nil // the proxy then parses no peer address per request
	}
	return proxy.New(proxy.Options{
		RelayHeader:  cfg.Proxy.RelayHeader,
		StripHeaders: []string{ProbeHeader},
		Trusted:      trusted,
		ClientIP:     g.clientIP().Of,
		MaxBodyBytes: int64(cfg.Server.MaxBodyBytes),
		AllowOrigin:  allowOrigin(cfg.Server.WebSocketOrigins),
		DialTimeout:  cfg.Proxy.DialTimeout, ResponseHeaderTimeout: cfg.Proxy.ResponseHeaderTimeout,
		HomeResponseHeaderTimeout: cfg.Proxy.HomeResponseHeaderTimeout,
		MinBodyRate:               int64(cfg.Server.MinBodyRate), MinResponseRate: int64(cfg.Server.MinResponseRate),
		MinRateGrace: cfg.Server.MinRateGrace, MinRateWindow: cfg.Server.MinRateWindow,
		MaxIdleConnsPerHost: cfg.Proxy.MaxIdleConnsPerHost, IdleConnTimeout: cfg.Proxy.IdleConnTimeout,
		BodyBuffer: int64(cfg.Proxy.BodyBuffer), BodySpool: int64(cfg.Proxy.BodySpool), SpoolDir: cfg.Proxy.BodySpoolDir,
		BodyBudgetClient: int64(cfg.Proxy.BodyBudgetClient), BodyBudgetTotal: int64(cfg.Proxy.BodyBudgetTotal),
		Host:      hostPolicy(cfg.Proxy),
		Protected: g.protected,
		Log:       g.log.With("component", "proxy"),
	})
}

// hostPolicy is the proxy's Host rule set of proxy.host_header and
// proxy.host_headers (docs/headers.md).
func hostPolicy(p config.ProxyConfig) proxy.HostPolicy {
	rule := func(v string) string {
		if v == config.HostAuto {
			return proxy.HostAuto
		}
		return v // client, upstream and fixed values are spelled alike
	}
	hp := proxy.HostPolicy{Default: rule(p.HostHeader)}
	conv := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = rule(v)
		}
		return out
	}
	hp.Homes, hp.Apps = conv(p.HostHeaders.Homes), conv(p.HostHeaders.Apps)
	return hp
}

// protected reports whether the canonical header name n is one an access
// policy sets (proxy.Options.Protected), by the policies now: a reload
// that changes them applies at once.
func (g *Gateway) protected(n string) bool {
	return g.gate != nil && g.gate.Set().Protects(n)
}

// portWatch maps the config's "zero is off" to the probe's "negative is off".
func portWatch(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// allowOrigin returns the check of a WebSocket's Origin: the request's own
// host, or one of allowed (server.websocket_origins; "*" allows any).
func allowOrigin(allowed []string) func(origin string, r *http.Request) bool {
	return func(origin string, r *http.Request) bool {
		if proxy.SameHostOrigin(origin, r) {
			return true
		}
		for _, o := range allowed {
			if o == "*" || o == origin {
				return true
			}
		}
		return false
	}
}

// Handler returns the public handler (for tests and benchmarks).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Sessions returns the session table.
func (g *Gateway) Sessions() *sessions.Table { return g.sessions }

// Engine returns the wake engine.
func (g *Gateway) Engine() *wake.Engine { return g.engine }

// Addr returns the public listener's address once it listens.
func (g *Gateway) Addr(ctx context.Context) (net.Addr, error) {
	select {
	case a := <-g.addr:
		g.addr <- a
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The shutdown order. Serve does steps 1 to 5 once its ctx is done; Close
// (which main defers) does steps 6 to 8. Each step starts only after the one
// before it has ended.
//
//  1. Mark draining: /readyz answers 503 while the listener keeps serving for
//     server.drain_delay, so load balancers move away.
//  2. Stop accepting (http.Server.Shutdown).
//  3. Tell every relayed WebSocket to go away (a close frame with 1001 to
//     both sides; with server.drain_websockets: end, only once the grace is
//     over), then let in-flight requests and WebSockets finish, up to
//     server.drain_grace.
//  4. End what is left, counting the requests and WebSockets cut in the
//     log: the base context ends every request (one whose response has not
//     begun is answered 503 shutting_down) and with it every hijacked
//     backend connection; wait up to afterCloseWait for their handlers to
//     return, and no longer (nothing keeps waiting afterwards).
//  5. Stop the admin listener (its event streams end), then background work
//     (the idle and roll loop, the fleet's loop, app observation).
//  6. Stop the engine: wakes in flight are cancelled and waited for, so none
//     can start a home after this point.
//  7. Quiesce exec homes: stop every local home process, keeping its stored
//     desired state, so an interrupted gateway leaves no process behind and
//     the next start wakes what should run. With
//     exec.keep_running_on_shutdown the processes are left running and the
//     next start adopts them. Remote homes are never touched.
//  8. Close the providers, the webhooks' deliveries, the proxy and the
//     store.
const (
	// afterCloseWait bounds step 4's wait for handlers that outlive the
	// end of their context.
	afterCloseWait = 5 * time.Second
	// goingAwayWait bounds the wait for WebSockets told to go away when
	// the grace is over (server.drain_websockets: end).
	goingAwayWait = 2 * time.Second
	// quiesceSlack is added to twice exec.stop_grace (SIGTERM, then
	// SIGKILL) to bound step 7 as a whole.
	quiesceSlack = 5 * time.Second
)

// Run listens on the config's address and serves until ctx is done, then
// shuts down in the order written above Serve.
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := listen(g.cfg.Listen, "listen")
	if err != nil {
		return err
	}
	return g.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened. It returns after step 5 of
// the shutdown order; Close does the rest.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := g.newServer()
	// Self-probes know where to go before anyone learns the address, and
	// the admin API's views name it from their first answer.
	g.routeTab.probe.Listening(ln.Addr())
	bound := ln.Addr().String()
	g.bound.Store(&bound)
	// The admin listener (admin.go) serves through the drain, so operators
	// can watch it, and stops after the public listener has closed.
	stopAdmin, err := g.startAdmin()
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopAdmin()
	g.addr <- ln.Addr()
	g.log.Info("listening", "addr", ln.Addr().String(), "instance", g.cfg.Instance, "tls", g.cfg.TLS.Mode)
	g.logSharedUser()
	g.logClosedPrograms()
	stopBG := g.startBackground()
	defer stopBG()

	// The plain-HTTP listener and certificate management (gateway_tls.go).
	stopFront, err := g.startFront(ln)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopFront()
	pubs := g.newPublicServers(srv)
	serveErr := make(chan error, 1)
	go pubs.serve(g, g.connLimit.Listener(ln), serveErr)
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	g.drain(pubs, serveErr) // steps 1 to 4
	stopAdmin()             // step 5
	stopFront()
	stopBG()
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		g.log.Warn("serve", "err", err)
	}
	g.log.Info("stopped")
	return nil
}

// newServer is the public listener's HTTP server. Every request's context
// descends from hardStop, which step 4 of the shutdown cancels.
func (g *Gateway) newServer() *http.Server {
	return &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: g.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       g.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    int(g.cfg.Server.MaxHeaderBytes),
		BaseContext:       func(net.Listener) context.Context { return g.hardStop },
		ConnContext:       edge.ConnContext,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
}

// startBackground starts the engine's idle and roll loop, the fleet's
// loop (with Redis), the watch of the store's disk and the app
// observation (self-probes, which start once the listener is up and are
// skipped while draining). The returned stop ends them and waits for
// them; it may be called more than once.
func (g *Gateway) startBackground() (stop func()) {
	bg, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if g.fleet != nil {
		g.fleet.Heartbeat(bg)
	}
	wg.Go(func() { g.engine.Run(bg, idleTick(g.cfg)) })
	if g.fleet != nil {
		wg.Go(func() { g.fleet.Run(bg, g.version) }) // control/fleet_sync.go
	}
	wg.Go(func() { g.routeTab.Run(bg) })
	wg.Go(func() { control.WatchStore(bg, g.store, g.log) })
	g.startDiscovery(bg, &wg) // discover.go
	return func() {
		cancel()
		wg.Wait()
	}
}

// drain runs steps 1 to 4 of the shutdown order. serveErr is srv.Serve's
// result, which drain leaves in place for the caller.
func (g *Gateway) drain(srv publicServers, serveErr chan error) {
	// 1. Draining: /readyz fails; keep serving for drain_delay.
	if !g.draining.Swap(true) {
		close(g.drainStarted)
	}
	if d := g.cfg.Server.DrainDelay; d > 0 {
		g.log.Info("draining", "drain_delay", d.String())
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case err := <-serveErr:
			t.Stop()
			serveErr <- err
		}
	}
	grace := g.cfg.Server.DrainGrace
	atStart := g.cfg.Server.DrainWebSockets == "start"
	goingAway := 0
	if atStart {
		// WebSockets are told to go away now (1001 to both sides), so
		// that the drain waits only for the requests in flight.
		goingAway = g.proxy.GoingAway()
	}
	g.log.Info("shutting down", "drain_grace", grace.String(), "websockets_going_away", goingAway)
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	// 2. Stop accepting. Shutdown waits for plain requests on its own,
	// and closes each connection once its last response is written; it
	// is given the grace and step 4's wait.
	shutCtx, cancel := context.WithTimeout(context.Background(), grace+g.closeWait)
	defer cancel()
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.shutdown(shutCtx) }()
	// 3. Wait for every request, hijacked WebSockets included, up to grace.
	cutReqs, cutWS := 0, 0
	select {
	case <-g.inflight.Zero():
	case <-graceTimer.C:
		cutReqs, cutWS = g.graceOver(atStart)
	}
	// 4. End what is left, wait a bounded while for the handlers (a
	// request cut before its response began is answered) and for their
	// responses to be written, then close the connections.
	g.hardCancel(errCut)
	t := time.NewTimer(g.closeWait)
	defer t.Stop()
	select {
	case <-g.inflight.Zero():
	case <-t.C:
		g.log.Warn("requests still running after close", "wait", g.closeWait.String())
	}
	// Shutdown returns by shutCtx's end at the latest.
	if err := <-shutdownDone; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		g.log.Warn("shutdown", "err", err)
	}
	srv.close()
	g.log.Info("drained", "requests_cut", cutReqs, "websockets_cut", cutWS)
}

// errCut ends the context of every request still running when the drain
// grace is over; a request cut before its response began is answered with
// it (503 shutting_down).
var errCut = fault.New(fault.ShuttingDown, homefault.CodeShuttingDown, "The gateway is shutting down.")

// graceOver is reached when the drain grace ends with requests or
// WebSockets still open. With drain_websockets: end, the WebSockets are
// told to go away now and get goingAwayWait to close. It logs and returns
// what is left to cut: requests (WebSockets not counted) and WebSockets.
func (g *Gateway) graceOver(toldAtStart bool) (requests, websockets int) {
	if !toldAtStart {
		if n := g.proxy.GoingAway(); n > 0 {
			g.log.Info("drain grace over; WebSockets told to go away", "websockets", n)
			t := time.NewTimer(goingAwayWait)
			select {
			case <-g.inflight.Zero():
			case <-t.C:
			}
			t.Stop()
		}
	}
	websockets = g.proxy.WebSockets()
	requests = max(g.inflight.Count()-websockets, 0)
	if requests+websockets > 0 {
		g.log.Warn("drain grace over; cutting what is left", "requests", requests, "websockets", websockets)
	}
	return requests, websockets
}

// idleTick is the idle loop's configured period: a second, or shorter for
// eager rolls. Each home's own idle timeout shortens it at registration,
// in the engine (wake.Engine.Register), for config and API homes alike.
func idleTick(cfg *config.Config) time.Duration {
	tick := time.Second
	if d := cfg.Roll.IdleAfter; cfg.Roll.Mode == "eager" && d/4 < tick {
		tick = max(d/4, 10*time.Millisecond) // eager rolls run on the same loop
	}
	return tick
}

// Close does steps 6 to 8 of the shutdown order (see Serve), after closing
// the metrics and the app observer: it stops the engine, quiesces exec
// homes (unless exec.keep_running_on_shutdown), and closes the providers,
// the webhooks' deliveries (events still queued are not sent), the proxy
// and the store. It is safe after a half-failed New, and without
// Serve: homes a gateway woke never outlive its Close.
func (g *Gateway) Close() {
	g.front.Close()
	g.closeCertStore()
	g.gate.Close()
	if g.routeTab != nil {
		g.routeTab.Close()
	}
	if g.engine != nil {
		g.engine.Close()
	}
	if g.providers != nil {
		g.quiesceHomes()
		g.providers.close(g.log)
	}
	g.hooks.Close()
	if g.proxy != nil {
		g.proxy.Close()
	}
	if g.store != nil {
		g.withdrawHeartbeat()
		if err := g.store.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			g.log.Warn("close store", "err", err)
		}
	}
	if g.hardCancel != nil {
		g.hardCancel(errCut)
	}
}

// quiesceHomes is step 7 of the shutdown order: it stops the process of
// every exec home, leaving the stored records (and so the desired state)
// as they are, or leaves them all running with exec.keep_running_on_shutdown.
func (g *Gateway) quiesceHomes() {
	if g.cfg.Exec.KeepRunningOnShutdown {
		g.log.Info("leaving homes running for the next start to adopt (exec.keep_running_on_shutdown)")
		return
	}
	homesOf := func(name string) []string {
		var ids []string
		g.eachHome(func(hr *route.Home) bool {
			if hr.Spec().Provider == name {
				ids = append(ids, hr.Spec().ID)
			}
			return true
		})
		return ids
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*g.cfg.Exec.StopGrace+quiesceSlack)
	defer cancel()
	handed, stoppedHere := 0, 0
	if g.fleet != nil && g.engine != nil {
		// In a fleet, only what this gateway still holds: a home another
		// gateway took over (this one was paused or cut off) is its, and
		// this gateway's provider lets it be. What it holds goes through
		// the fleet's stopping handshake first: a home another gateway
		// still serves is handed over running, not stopped under its
		// requests (package stopping).
		all := homesOf
		homesOf = func(name string) []string {
			ids := all(name)
			stopped, kept, rest := g.engine.ShutdownStop(ctx, g.engine.Holds(ctx, ids))
			handed, stoppedHere = handed+len(kept), stoppedHere+len(stopped)
			if l, ok := g.providers[name].(interface{ Let(id string) }); ok && len(rest) < len(ids) {
				keep := make(map[string]bool, len(rest))
				for _, id := range rest {
					keep[id] = true
				}
				for _, id := range ids {
					if !keep[id] {
						l.Let(id)
					}
				}
			}
			return rest
		}
	}
	stopped := 0
	var released []string
	defer func() {
		g.log.Info("homes stopped; their desired state is kept for the next start", "homes", stopped+stoppedHere,
			"handed_over", handed)
	}()
	for _, q := range g.providers.quiesce(ctx, homesOf) {
		if q.Err != nil || !q.Proven {
			g.log.Warn("home not proven stopped at shutdown", "home", q.ID, "err", q.Err)
			continue
		}
		if q.Ran {
			stopped++
			released = append(released, q.ID)
		}
	}
	g.fleet.Release(released)
}
