package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/wakegate/wakegate/route"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/tlsfront"
)

// This file wires the TLS front door (package tlsfront) into the gateway:
// the HTTPS listener (TLS 1.2+, HTTP/2 and HTTP/1.1 by ALPN, the framing
// check above TLS, explicit HTTP/2 limits, Strict-Transport-Security, 421
// for a Host that is not the connection's server name), the plain-HTTP
// listener (ACME HTTP-01 and a redirect built from a validated host), the
// self-probe's pinned certificate, and which host names the gateway serves.

// newFront builds the front door when tls.mode is not off; it obtains
// nothing until Serve's listeners are up.
func (g *Gateway) newFront() error {
	t := &g.cfg.TLS
	if !t.On() {
		return nil
	}
	cert, roots, err := tlsfront.SelfSigned(control.SelfProbeServerName)
	if err != nil {
		return err
	}
	probe := g.routeTab.probe
	probe.OverTLS(roots, g.cfg.Proxy.DialTimeout)
	opts := tlsfront.Options{
		Mode: tlsfront.Mode(t.Mode), Names: t.Names, CertFile: t.CertFile, KeyFile: t.KeyFile,
		CA: t.CA, Email: t.Email, TrustedRoots: t.Roots(), DataDir: g.cfg.DataDir, Storage: g.certStorage(),
		ClassicalKeyExchange: t.KeyExchange == "classical",
		Override: func(hello *tls.ClientHelloInfo) *tls.Certificate {
			if hello.ServerName == control.SelfProbeServerName && hello.Conn != nil && probe.Owns(hello.Conn.RemoteAddr().String()) {
				return &cert
			}
			return nil
		},
		OnEvent: g.publishCertEvent,
		Log:     g.log.With("component", "tls"),
	}
	for _, c := range t.Challenges {
		opts.HTTP01 = opts.HTTP01 || c == "http-01"
		opts.TLSALPN01 = opts.TLSALPN01 || c == "tls-alpn-01"
	}
	if t.EAB.KeyID != "" {
		opts.EAB = &tlsfront.EAB{KeyID: t.EAB.KeyID, MACKey: t.EAB.MAC()}
	}
	if opts.Mode == tlsfront.OnDemand {
		od := t.OnDemand
		g.decider = tlsfront.NewDecider(tlsfront.DecisionOptions{
			Known: g.routedHost, Allow: od.Allow, CacheSize: od.CacheSize, CacheTTL: od.CacheTTL,
			Rate: rate.Limit(float64(od.IssuePerMinute) / 60), Burst: od.IssuePerMinute,
			OnRefuse: func(reason string) { g.tlsMetrics.refused.WithLabelValues(reason).Inc() },
		})
		opts.Decider = g.decider
		g.routeTab.OnChange(g.hostsChanged)
	}
	g.front, err = tlsfront.New(opts)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return g.registerTLSMetrics()
}

// hostsChanged drops the on-demand decisions after apps or homes changed,
// so that a name registered a moment ago gets its certificate at once.
func (g *Gateway) hostsChanged() {
	if g.decider != nil {
		g.decider.Forget()
	}
}

// servedHost reports whether the gateway serves host (lower-case, no
// port): a configured name, an on-demand allowed name, or an app or home
// under the host-routing domains.
func (g *Gateway) servedHost(host string) bool {
	if g.front != nil && g.front.Managed(host) {
		return true
	}
	for _, n := range g.cfg.TLS.OnDemand.Allow {
		if strings.EqualFold(n, host) {
			return true
		}
	}
	return g.routedHost(host)
}

// routedHost reports whether host is {slug}.{apps_domain} of a registered
// app or {target}.{nodes_domain} of a registered home.
func (g *Gateway) routedHost(host string) bool {
	if slug, ok := route.HostLabel(host, g.cfg.Hosts.AppsDomain); ok {
		if _, ok := g.appBySlug(slug); ok {
			return true
		}
	}
	if target, ok := route.HostLabel(host, g.cfg.Hosts.NodesDomain); ok {
		if _, ok := g.homeAt(target); ok {
			return true
		}
	}
	return false
}

// The HTTPS listener's fixed HTTP/2 limits, besides those of tls.http2:
// the protocol's smallest frame size (the default, written out), and how
// long a connection with pending output may go without writing a byte
// before it is closed (a client that stopped reading).
const (
	h2MaxReadFrameSize = 1 << 14
	h2WriteByteTimeout = 30 * time.Second
)

// publicListener returns what srv serves: ln with the framing check, and
// with TLS on, TLS below it and srv set up for HTTPS (setupHTTPS).
func (g *Gateway) publicListener(srv *http.Server, ln net.Listener) net.Listener {
	if g.front == nil {
		return edge.FramingListener{Listener: ln}
	}
	g.setupHTTPS(srv)
	return g.tlsListener(ln, true)
}

// tlsListener is ln with TLS handshakes done below it; watch as
// edge.NewTLSListener's.
func (g *Gateway) tlsListener(ln net.Listener, watch bool) net.Listener {
	return edge.NewTLSListener(ln, g.front.TLSConfig(), g.cfg.TLS.HandshakeTimeout, g.tlsMetrics.handshakeFailed, watch)
}

// setupHTTPS sets srv up to serve what a TLS listener hands it: HTTP/1.1
// and HTTP/2 with their limits, the HTTPS-only headers and checks
// (httpsHandler), and the per-connection guards.
func (g *Gateway) setupHTTPS(srv *http.Server) {
	t := &g.cfg.TLS
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	// HTTP/2 negotiated by ALPN reaches the server on a connection it does
	// not know is TLS (tlsconn.go): its prior-knowledge path serves it.
	srv.Protocols.SetUnencryptedHTTP2(true)
	srv.HTTP2 = &http.HTTP2Config{
		MaxConcurrentStreams: t.HTTP2.MaxConcurrentStreams,
		// The header list is bounded by srv.MaxHeaderBytes
		// (server.max_header_bytes), for HTTP/2 as for HTTP/1.1.
		MaxReadFrameSize: h2MaxReadFrameSize,
		WriteByteTimeout: h2WriteByteTimeout,
	}
	srv.Handler = g.httpsHandler(srv.Handler)
	srv.ConnContext = edge.TLSConnContext(rate.Limit(t.HTTP2.MaxResetsPerSecond))
}

// httpsHandler adds what only HTTPS answers carry or check:
// Strict-Transport-Security, 421 for a Host that is not the connection's
// server name (a connection reused for another host), and the count of
// HTTP/2 streams the client cancelled (the rapid-reset guard).
func (g *Gateway) httpsHandler(next http.Handler) http.Handler {
	hsts := hstsValue(g.cfg.TLS.HSTS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hsts != "" {
			w.Header().Set("Strict-Transport-Security", hsts)
		}
		if misdirected(r) && !g.routeTab.probe.Owns(r.RemoteAddr) {
			w.Header().Set("Connection", "close")
			proxy.WriteClassified(w, r, fault.Response{Status: http.StatusMisdirectedRequest, Code: "misdirected",
				Message: "This connection was opened for another host name; open a new one for this host."})
			return
		}
		next.ServeHTTP(w, r)
		if r.ProtoMajor == 2 && r.Context().Err() != nil {
			if edge.StreamCancelled(r.Context()) {
				g.log.Warn("closed an HTTP/2 connection that cancelled too many streams", "remote", r.RemoteAddr,
					"limit_per_second", g.cfg.TLS.HTTP2.MaxResetsPerSecond)
			}
		}
	})
}

// misdirected reports whether r's Host names another host than the server
// name its TLS connection was opened for.
func misdirected(r *http.Request) bool {
	if r.TLS == nil || r.TLS.ServerName == "" {
		return false
	}
	host, ok := tlsfront.RequestHost(r.Host)
	return !ok || !strings.EqualFold(host, r.TLS.ServerName)
}

// hstsValue is the Strict-Transport-Security value, or "" when off.
func hstsValue(h config.HSTSConfig) string {
	if h.MaxAge <= 0 {
		return ""
	}
	v := "max-age=" + strconv.FormatInt(int64(h.MaxAge/time.Second), 10)
	if h.IncludeSubdomains {
		v += "; includeSubDomains"
	}
	if h.Preload {
		v += "; preload"
	}
	return v
}

// UseHTTPListener gives Serve the plain-HTTP listener (tls.http_listen)
// already opened, as tests do to know its port first. Call it before
// Serve.
func (g *Gateway) UseHTTPListener(ln net.Listener) { g.httpLn = ln }

// startFront starts the plain-HTTP listener and then certificate
// management, once the HTTPS listener pub listens. stop closes the
// plain-HTTP listener and waits for it; it may be called more than once.
func (g *Gateway) startFront(pub net.Listener) (stop func(), err error) {
	if g.front == nil {
		return func() {}, nil
	}
	ln := g.httpLn
	if ln == nil && g.cfg.TLS.HTTPListen != "" {
		if ln, err = listen(g.cfg.TLS.HTTPListen, "tls.http_listen"); err != nil {
			return nil, err
		}
	}
	httpPort := 0
	stop = func() {}
	if ln != nil {
		srv := &http.Server{
			Handler:           g.front.HTTPHandler(g.servedHost, portOf(pub.Addr())),
			ReadHeaderTimeout: g.cfg.Server.ReadHeaderTimeout,
			IdleTimeout:       g.cfg.Server.IdleTimeout,
			MaxHeaderBytes:    int(g.cfg.Server.MaxHeaderBytes),
			ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				g.log.Warn("http listener", "err", err)
			}
		})
		httpPort, _ = strconv.Atoi(portOf(ln.Addr()))
		g.log.Info("listening for ACME challenges and HTTPS redirects", "addr", ln.Addr().String())
		var once sync.Once
		stop = func() {
			once.Do(func() {
				_ = srv.Close()
				wg.Wait()
			})
		}
	}
	tlsPort, _ := strconv.Atoi(portOf(pub.Addr()))
	g.front.SetChallengePorts(hostOf(pub.Addr()), httpPort, tlsPort)
	if err := g.front.Start(); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

func hostOf(a net.Addr) string {
	h, _, _ := net.SplitHostPort(a.String())
	return h
}
