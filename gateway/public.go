package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/h1serve"
)

// publicServers serves the public listener. A loop of its own (h1serve)
// takes plain HTTP/1.1 requests, over TCP or, with TLS on, over a TLS
// connection whose handshake the listener did, and hands any connection
// it does not take (an upgrade, Expect, a chunked or HTTP/1.0 request,
// anything malformed, HTTP/2) to net/http's server, which serves that
// connection from then on with the same handler.
type publicServers struct {
	std  *http.Server
	fast *h1serve.Server // nil: net/http alone (server.http1_server: net/http)
}

// newPublicServers builds the servers for the public listener; net/http's
// server is srv, set up for HTTPS here when TLS is on.
func (g *Gateway) newPublicServers(srv *http.Server) publicServers {
	ps := publicServers{std: srv}
	if g.cfg.Server.HTTP1Server != "net/http" {
		if g.front != nil {
			g.setupHTTPS(srv) // the loop serves the same handler, HTTPS's
		}
		ps.fast = &h1serve.Server{
			Handler:           srv.Handler,
			ReadHeaderTimeout: srv.ReadHeaderTimeout,
			IdleTimeout:       srv.IdleTimeout,
			MaxHeaderBytes:    srv.MaxHeaderBytes,
			// A request the loop serves names net/http's server as its
			// own (http.ServerContextKey), so that handlers which ask act
			// as under it: ReverseProxy aborts a body the upstream cut.
			BaseContext: context.WithValue(g.hardStop, http.ServerContextKey, srv),
			ErrorLog:    srv.ErrorLog,
		}
	}
	return ps
}

// http1Stats is what the HTTP/1.1 loop has done; zero without one.
func (g *Gateway) http1Stats() h1serve.Stats {
	if s := g.http1.Load(); s != nil {
		return s.Stats()
	}
	return h1serve.Stats{}
}

// serve serves ln (already wrapped by the connection cap) until the
// servers shut down, and sends the result on done.
func (ps publicServers) serve(g *Gateway, ln net.Listener, done chan<- error) {
	if ps.fast == nil {
		done <- ps.std.Serve(g.publicListener(ps.std, ln))
		return
	}
	g.http1.Store(ps.fast)
	hand := ps.fast.Handoff(ln.Addr())
	if g.front != nil {
		ln = g.tlsListener(ln, false)
	}
	fastErr := make(chan error, 1)
	go func() {
		err := ps.fast.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			_ = hand.Close() // the accept loop failed: end net/http's too
		}
		fastErr <- err
	}()
	err := ps.std.Serve(edge.FramingListener{Listener: hand})
	if ferr := <-fastErr; !errors.Is(ferr, http.ErrServerClosed) {
		err = ferr
	} else if errors.Is(err, net.ErrClosed) {
		err = http.ErrServerClosed
	}
	done <- err
}

// shutdown stops accepting and waits for the requests of both servers,
// up to ctx.
func (ps publicServers) shutdown(ctx context.Context) error {
	if ps.fast == nil {
		return ps.std.Shutdown(ctx)
	}
	var wg sync.WaitGroup
	var fastErr error
	wg.Go(func() { fastErr = ps.fast.Shutdown(ctx) })
	err := ps.std.Shutdown(ctx)
	wg.Wait()
	return errors.Join(err, fastErr)
}

// close closes every connection of both servers.
func (ps publicServers) close() {
	_ = ps.std.Close()
	if ps.fast != nil {
		_ = ps.fast.Close()
	}
}
