package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/edge"
)

// adminServer is the admin listener: the admin API of package admin over
// the control plane (adminapi.Backend, built in controlplane.go), /metrics
// and the dashboard. It is a listener of its own, never the public one, and it
// serves through the drain so that operators can watch it.
type adminServer struct {
	log    *slog.Logger
	api    *admin.Server
	srv    *http.Server
	ctx    context.Context // ends every admin request (event streams) at stop
	cancel context.CancelFunc
	done   chan error // one answer per listener served
	// serving is how many listeners Serve runs on (the TCP listener, the
	// socket).
	serving int
}

// adminStopGrace is how long admin requests other than event streams may
// take to finish once the admin listener stops.
const adminStopGrace = 2 * time.Second

// startAdmin opens and serves the admin listener and the admin socket,
// each when it is configured. It returns the function that stops them
// (safe to call more than once).
func (g *Gateway) startAdmin() (stop func(), err error) {
	c := g.cfg.Admin
	log := g.log.With("listener", "admin")
	var tcp, sock net.Listener
	if c.Listen != "" && len(c.ResolvedTokens()) == 0 {
		g.log.Info("admin listener off: admin.tokens holds no token")
	}
	if c.Listen != "" && len(c.ResolvedTokens()) > 0 {
		if tcp, err = net.Listen("tcp", c.Listen); err != nil {
			return nil, fmt.Errorf("admin listen %s: %w", c.Listen, err)
		}
	}
	if c.Socket != "" {
		sock, err = edge.ListenAdminSocket(c.Socket, c.SocketGID(), log)
		switch {
		case err != nil && c.SocketDefaulted():
			g.log.Warn("admin socket off", "err", err, "hint", "set admin.socket to a path that works, or to \"\" to turn it off")
			sock = nil
		case err != nil:
			if tcp != nil {
				_ = tcp.Close()
			}
			return nil, err
		}
	}
	if tcp == nil && sock == nil {
		return func() {}, nil
	}
	var hosts map[string]bool
	if tcp != nil {
		hosts = admin.AllowedHosts(c.Listen, tcp.Addr(), c.AllowedHosts)
	}
	api := admin.New(g.adminBackend(), admin.Options{
		Tokens: c.ResolvedTokens(), Hosts: hosts,
		AuthFailuresPerMinute: c.AuthFailures, Metrics: g.metrics.Handler(), Backup: g.backupHandler(),
		Certificates:  g.certificatesHandler(),
		OnAuthFailure: g.metrics.AuthFailures().Inc,
		OnRateLimited: g.metrics.RateLimited("admin_auth").Inc,
		WaitTimeout:   g.cfg.Wake.WakeTimeout, Log: log,
	})
	a := &adminServer{log: log, api: api, done: make(chan error, 2)}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.srv = &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: g.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       g.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    int(g.cfg.Server.MaxHeaderBytes),
		BaseContext:       func(net.Listener) context.Context { return a.ctx },
		ConnContext:       edge.AdminConnContext, // the socket's checked peer
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	g.admin = a
	for _, ln := range []net.Listener{tcp, sock} {
		if ln == nil {
			continue
		}
		a.serving++
		go func() { a.done <- a.srv.Serve(ln) }()
	}
	if tcp != nil {
		g.adminAddr <- tcp.Addr()
		g.log.Info("admin listening", "addr", tcp.Addr().String())
		if w := config.AdminListenWarning(c.Listen); w != "" {
			g.log.Warn(w)
		}
	}
	if sock != nil {
		g.adminSocket <- sock.Addr().String()
		g.log.Info("admin socket listening", "path", sock.Addr().String(), "group", c.SocketGroup)
	}
	return sync.OnceFunc(a.stop), nil
}

// stop ends event streams, lets other admin requests finish briefly, and
// closes the listener.
func (a *adminServer) stop() {
	a.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), adminStopGrace)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		_ = a.srv.Close()
	}
	for range a.serving {
		if err := <-a.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("admin serve", "err", err)
		}
	}
}

// AdminAddr returns the admin listener's address once it listens. It waits
// on ctx; an admin listener that is off never answers.
func (g *Gateway) AdminAddr(ctx context.Context) (net.Addr, error) {
	select {
	case a := <-g.adminAddr:
		g.adminAddr <- a
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// AdminSocket returns the admin socket's path once it listens. It waits
// on ctx; an admin socket that is off never answers.
func (g *Gateway) AdminSocket(ctx context.Context) (string, error) {
	select {
	case p := <-g.adminSocket:
		g.adminSocket <- p
		return p, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// AdminRoutes returns the routes the admin listener serves, nil while it
// is off or not started.
func (g *Gateway) AdminRoutes() []admin.Route {
	if g.admin == nil {
		return nil
	}
	return g.admin.api.Routes()
}

// SetVersion sets the version the admin API reports. Call it before Serve.
func (g *Gateway) SetVersion(v string) { g.version = v }
