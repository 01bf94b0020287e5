// Package gateway assembles wakegate: config, listeners, router, the wake
// engine and the proxy, and the shutdown order.
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
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// ProbeHeader carries the internal probe token of the gateway's own
// self-probes. It is stripped from every inbound request.
const ProbeHeader = "X-Wakegate-Probe"

// Gateway is one running wakegate.
type Gateway struct {
	cfg      *Config
	log      *slog.Logger
	store    registry.Store
	exec     *provider.Exec
	engine   *wake.Engine
	sessions *proxy.Sessions
	proxy    *proxy.Proxy

	homeTab  atomic.Pointer[homeTable] // copy on write, see hometable.go
	homeMu   sync.Mutex                // serialises changes of homeTab
	routeTab *routeTable               // app routes, their observer and the self-probe (routetable.go)
	reg      *registrar                // registers homes and apps (registrar.go)

	draining atomic.Bool
	inflight rtInflight // every request being served, WebSockets included (inflight.go)
	reqSeq   atomic.Uint64
	reqPre   string

	// hardStop ends every request's context when the drain grace is over;
	// it is what closes hijacked WebSocket connections.
	hardStop   context.Context
	hardCancel context.CancelFunc

	handler http.Handler
	addr    chan net.Addr

	metrics   *metrics     // metrics.go
	admin     *adminServer // admin.go; nil when the admin listener is off
	adminAddr chan net.Addr
	started   time.Time
	version   string // reported by the admin API; SetVersion
}

type homeRoute struct {
	spec  wake.HomeSpec
	token string
}

// New builds a gateway from a validated config: it opens the store and the
// providers and registers homes. Close releases what New opened.
func New(ctx context.Context, cfg *Config, log *slog.Logger) (g *Gateway, err error) {
	g = &Gateway{cfg: cfg, log: log, sessions: proxy.NewSessions(),
		addr: make(chan net.Addr, 1), adminAddr: make(chan net.Addr, 1), started: time.Now(), version: "dev"}
	g.homeTab.Store(&homeTable{byTarget: map[string]*homeRoute{}, byID: map[string]*homeRoute{}})
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	var b [4]byte
	_, _ = rand.Read(b[:])
	g.reqPre = hex.EncodeToString(b[:]) + "-"
	g.hardStop, g.hardCancel = context.WithCancel(context.Background())

	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if g.store, err = registry.OpenBolt(filepath.Join(dataDir, "state.db"), registry.BoltOptions{}); err != nil {
		return nil, err
	}
	g.exec, err = provider.NewExec(provider.ExecConfig{
		Command: cfg.Exec.Command, DataDir: dataDir, Env: cfg.Exec.Env,
		LogMaxBytes: int64(cfg.Exec.LogMaxBytes), StopGrace: cfg.Exec.StopGrace,
		RestartBudget: cfg.Exec.RestartBudget, RestartWindow: cfg.Exec.RestartWindow,
		VersionCommand: cfg.Exec.VersionCommand, SuspendSignal: cfg.Exec.SuspendSignal,
		OnChange: func(id string, r provider.Result) {
			if g.engine != nil {
				g.engine.ProviderChanged(id, r)
			}
		},
	}, log.With("provider", "exec"))
	if err != nil {
		return nil, err
	}
	static := &provider.Static{Endpoints: map[string]string{}}
	for _, hc := range cfg.Homes {
		if hc.Provider == "static" {
			static.Endpoints[hc.ID] = hc.Endpoint
		}
	}
	pc := cfg.Wake.Probe
	em := newEngineMetrics()
	g.engine = wake.New(wake.Options{
		Store: g.store, Providers: map[string]provider.Provider{"exec": g.exec, "static": static},
		Sessions: g.sessions, Instance: cfg.Instance,
		WarmTTL: cfg.Wake.WarmTTL, ReadyTimeout: cfg.Wake.ReadyTimeout, RetryAfter: cfg.Wake.RetryAfter,
		MaxConcurrent: cfg.Wake.MaxConcurrent, FailureBackoff: cfg.Wake.FailureBackoff,
		Probe: wake.ProbeSpec{Kind: wake.ProbeKind(pc.Kind), Path: pc.Path, AttemptTimeout: pc.AttemptTimeout,
			Settle: pc.Settle, MinPause: pc.MinPause, MaxPause: pc.MaxPause, PortWatch: portWatch(*pc.PortWatch)},
		RelayHeader: cfg.Proxy.RelayHeader, Log: log.With("component", "wake"),
		Events:  wake.NewBus(256),
		Roll:    wake.RollOptions{Mode: wake.RollMode(cfg.Roll.Mode), IdleAfter: cfg.Roll.IdleAfter},
		Metrics: em,
	})
	// The configured roll target is stored before homes register (a home
	// adopted at registration may roll); an equal stored one is kept as is.
	if rt := cfg.Roll.Target; rt.Version != "" {
		if _, err := g.engine.SetTarget(ctx, registry.Target{Version: rt.Version, Command: rt.Command, Image: rt.Image}); err != nil {
			return nil, fmt.Errorf("roll.target: %w", err)
		}
	}
	g.metrics = newMetrics(g, em)
	g.metrics.start(g.engine.Events())
	g.reg = newRegistrar(g)
	if err := g.reg.RegisterConfigHomes(ctx); err != nil {
		return nil, err
	}
	g.proxy = proxy.New(proxy.Options{
		RelayHeader:  cfg.Proxy.RelayHeader,
		StripHeaders: []string{ProbeHeader},
		Trusted:      cfg.Server.isTrusted,
		MaxBodyBytes: int64(cfg.Server.MaxBodyBytes),
		AllowOrigin:  cfg.Server.allowOrigin,
		DialTimeout:  cfg.Proxy.DialTimeout, ResponseHeaderTimeout: cfg.Proxy.ResponseHeaderTimeout,
		MaxIdleConnsPerHost: cfg.Proxy.MaxIdleConnsPerHost, IdleConnTimeout: cfg.Proxy.IdleConnTimeout,
		Log: log.With("component", "proxy"),
	})
	g.routeTab = newRouteTable(g, cfg.Apps)
	// Homes and apps registered through the admin API, stored, come back
	// after the config's (which win on a conflict; registrar.go).
	if err := g.reg.Restore(ctx); err != nil {
		return nil, err
	}
	g.handler = g.routes()
	return g, nil
}

// portWatch maps the config's "zero is off" to the probe's "negative is off".
func portWatch(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (s *ServerConfig) isTrusted(ip net.IP) bool {
	for _, n := range s.trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func (s *ServerConfig) allowOrigin(origin string, r *http.Request) bool {
	if proxy.SameHostOrigin(origin, r) {
		return true
	}
	for _, o := range s.WebSocketOrigins {
		if o == "*" || o == origin {
			return true
		}
	}
	return false
}

// Handler returns the public handler (for tests and benchmarks).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Sessions returns the session table.
func (g *Gateway) Sessions() *proxy.Sessions { return g.sessions }

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

// Run serves until ctx is done, then shuts down in this order: mark
// draining (/readyz answers 503) and keep serving for drain_delay, stop
// accepting, let in-flight requests and
// WebSockets finish up to drain_grace, close what is left, stop background
// work, release the store. The admin listener serves until the public one
// has closed. Homes keep running with their desired state; the next start
// adopts them.
func (g *Gateway) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", g.cfg.Listen, err)
	}
	return g.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: g.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       g.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    int(g.cfg.Server.MaxHeaderBytes),
		BaseContext:       func(net.Listener) context.Context { return g.hardStop },
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	// The admin listener (admin.go) serves through the drain, so operators
	// can watch it, and stops after the public listener has closed.
	stopAdmin, err := g.startAdmin()
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer stopAdmin()
	g.addr <- ln.Addr()
	g.routeTab.probe.listening(ln.Addr())
	g.log.Info("listening", "addr", ln.Addr().String(), "instance", g.cfg.Instance)

	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		g.engine.Run(bg, idleTick(g.cfg))
	}()
	// App observations (self-probes) start once the listener is up; they
	// are skipped while draining and stop with the other background work.
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		g.routeTab.run(bg)
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(framingListener{ln}) }()

	select {
	case err := <-serveErr:
		stopBG()
		bgWG.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// 1. Draining: /readyz fails so load balancers move away; keep serving
	// for drain_delay so that they can notice.
	g.draining.Store(true)
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
	g.log.Info("shutting down", "drain_grace", grace.String())
	deadline, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// 2. Stop accepting; Shutdown waits for plain requests on its own.
	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.Shutdown(deadline) }()
	// 3. Wait for every request, hijacked WebSockets included, up to grace.
	allDone := make(chan struct{})
	go func() {
		g.inflight.Wait()
		close(allDone)
	}()
	select {
	case <-allDone:
	case <-deadline.Done():
		g.log.Warn("drain grace over; closing remaining connections")
	}
	// 4. Close what is left: the base context ends every request (and with
	// it every hijacked backend connection).
	g.hardCancel()
	_ = srv.Close()
	if err := <-shutdownDone; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		g.log.Warn("shutdown", "err", err)
	}
	select {
	case <-allDone:
	case <-time.After(5 * time.Second):
		g.log.Warn("requests still running after close")
	}
	// 5. The admin listener (its event streams end), background work, then
	// the store.
	stopAdmin()
	stopBG()
	bgWG.Wait()
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		g.log.Warn("serve", "err", err)
	}
	g.log.Info("stopped")
	return nil
}

func idleTick(cfg *Config) time.Duration {
	tick := time.Second
	for _, h := range cfg.Homes {
		if d := *h.IdleTimeout; d > 0 && d/4 < tick {
			tick = max(d/4, 10*time.Millisecond)
		}
	}
	if d := cfg.Roll.IdleAfter; cfg.Roll.Mode == "eager" && d/4 < tick {
		tick = max(d/4, 10*time.Millisecond) // eager rolls run on the same loop
	}
	return tick
}

// Close releases the engine, providers, proxy and store. It is safe after a
// half-failed New.
func (g *Gateway) Close() {
	g.metrics.close()
	if g.routeTab != nil {
		g.routeTab.close()
	}
	if g.engine != nil {
		g.engine.Close()
	}
	if g.exec != nil {
		_ = g.exec.Close()
	}
	if g.proxy != nil {
		g.proxy.Close()
	}
	if g.store != nil {
		if err := g.store.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			g.log.Warn("close store", "err", err)
		}
	}
	if g.hardCancel != nil {
		g.hardCancel()
	}
}
