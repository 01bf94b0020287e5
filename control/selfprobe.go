package control

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// SelfProbeUserAgent is the User-Agent of self-probes; it reaches the
// upstream (the probe token does not).
const SelfProbeUserAgent = "wakegate-self-probe"

// ProbeHeader carries the internal probe token of the gateway's own
// self-probes. It is stripped from every inbound request.
const ProbeHeader = "X-Wakegate-Probe"

// SelfProber sends the gateway's self-probes: real requests to the address
// Serve listens on, through the gateway's own listener, router and proxy,
// carrying a token that is random per process in ProbeHeader (DESIGN rule
// 14). The token is honoured only on a connection that this prober opened,
// from a loopback address (or the listener's own host): hygiene removes the
// header from every inbound request (and the proxy again), so an outside
// caller that sends it, with any value and in any letter case, is an
// ordinary caller.
type SelfProber struct {
	token  string
	addr   atomic.Pointer[string] // host:port self-probes dial; nil until Serve listens
	conns  sync.Map               // local addresses of open self-probe connections
	tr     *http.Transport
	client *http.Client
	scheme string // "https" once overTLS was called
}

// NewSelfProber returns a prober with a fresh token; it dials nothing
// until Listening is called.
func NewSelfProber(dialTimeout time.Duration) *SelfProber {
	var b [32]byte
	_, _ = rand.Read(b[:])
	p := &SelfProber{token: hex.EncodeToString(b[:]), scheme: "http"}
	dialer := &net.Dialer{Timeout: dialTimeout}
	p.tr = &http.Transport{
		Proxy:              nil,
		DialContext:        func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, dialer) },
		DisableKeepAlives:  true, // every self-probe proves a fresh connection
		DisableCompression: true,
	}
	p.client = &http.Client{Transport: p.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return p
}

// dial opens a connection to the listener and remembers its local address
// until it closes.
func (p *SelfProber) dial(ctx context.Context, dialer *net.Dialer) (net.Conn, error) {
	a := p.addr.Load()
	if a == nil {
		return nil, errors.New("self-probe: the gateway is not listening yet")
	}
	c, err := dialer.DialContext(ctx, "tcp", *a)
	if err != nil {
		return nil, fmt.Errorf("self-probe: %w", err)
	}
	key := c.LocalAddr().String()
	p.conns.Store(key, struct{}{})
	return &probeConn{Conn: c, forget: func() { p.conns.Delete(key) }}, nil
}

// probeConn forgets its local address when closed.
type probeConn struct {
	net.Conn
	once   sync.Once
	forget func()
}

// Close forgets the connection and closes it.
func (c *probeConn) Close() error {
	c.once.Do(c.forget)
	return c.Conn.Close()
}

// Listening records where self-probes go: the listener's address, with an
// unspecified host replaced by loopback.
func (p *SelfProber) Listening(a net.Addr) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	s := net.JoinHostPort(host, port)
	p.addr.Store(&s)
}

// Ready reports whether the gateway listens, so that a self-probe can go.
func (p *SelfProber) Ready() bool { return p.addr.Load() != nil }

// get sends GET path through the gateway with the probe token and returns
// the status, with the body read and closed.
func (p *SelfProber) get(ctx context.Context, path string) (int, error) {
	a := p.addr.Load()
	if a == nil {
		return 0, errors.New("the gateway is not listening yet")
	}
	u := &url.URL{Scheme: p.scheme, Host: *a, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set(ProbeHeader, p.token)
	req.Header.Set("Accept", "*/*")
	req.Header.Set("User-Agent", SelfProbeUserAgent)
	res, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// Admit removes the probe header from r and reports whether r is one of
// this prober's own self-probes: its connection was opened by the prober
// from loopback (or the listener's own host) and it carries the token.
// The listener marks such a request for the request path.
func (p *SelfProber) Admit(r *http.Request) bool {
	vals, ok := r.Header[ProbeHeader]
	if !ok {
		return false
	}
	r.Header.Del(ProbeHeader)
	if p == nil || len(vals) != 1 {
		return false
	}
	if _, own := p.conns.Load(r.RemoteAddr); !own {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		if a := p.addr.Load(); a == nil || ip == nil || !sameHost(*a, ip) {
			return false
		}
	}
	return subtle.ConstantTimeCompare([]byte(vals[0]), []byte(p.token)) == 1
}

// Token is this process's probe token. Only tests that prove an outside
// caller cannot use it read it.
func (p *SelfProber) Token() string { return p.token }

// sameHost reports whether addr's host is ip.
func sameHost(addr string, ip net.IP) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && net.ParseIP(h).Equal(ip)
}

// SelfProbeServerName is the server name of self-probes over TLS; the
// HTTPS listener answers it, on the prober's own connections only, with
// the prober's pinned certificate (gateway/gateway_tls.go).
const SelfProbeServerName = "self-probe.wakegate.invalid"

// OverTLS makes self-probes speak TLS to the HTTPS listener, trusting
// only roots (the pinned self-probe certificate).
func (p *SelfProber) OverTLS(roots *x509.CertPool, dialTimeout time.Duration) {
	conf := &tls.Config{RootCAs: roots, ServerName: SelfProbeServerName, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"}}
	dialer := &net.Dialer{Timeout: dialTimeout}
	p.tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := p.dial(ctx, dialer)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("self-probe: TLS: %w", err)
		}
		return tc, nil
	}
	p.scheme = "https"
}

// Owns reports whether remote, a peer address seen by the listener, is one
// of the prober's own open connections.
func (p *SelfProber) Owns(remote string) bool {
	_, ok := p.conns.Load(remote)
	return ok
}

// Close drops the prober's idle connections.
func (p *SelfProber) Close() { p.tr.CloseIdleConnections() }
