package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/internal/endpoint"
)

// Kind selects how readiness is proven.
type Kind string

const (
	// WS upgrades to a WebSocket at the probe path and passes when a
	// first message arrives or the socket stays open through the settle
	// window. It is the default for homes: it proves the real serving path.
	WS Kind = "ws"
	// HTTP sends GET to the health path and judges the status.
	HTTP Kind = "http"
	// TCP passes when a TCP connection to the endpoint opens.
	TCP Kind = "tcp"
	// Auto serves plain HTTP servers and WebSocket services alike:
	// each attempt tries a GET at each of AltPaths (the apps inside the
	// home), then a WebSocket upgrade at WSPath (as WS), then a GET
	// at Path (as HTTP), and passes on the first that does. A refused
	// connection ends the attempt at once, so the port watch applies. It
	// is the configuration's default (wake.probe.kind).
	Auto Kind = "auto"
)

// Spec says what to probe and how. Zero values are replaced by the
// defaults inside Probe, so a spec can be passed as it was configured.
type Spec struct {
	// Kind is the probe kind. Default (zero): WS.
	Kind Kind
	// Endpoint is the upstream base URL, for example http://127.0.0.1:8080.
	// The ws probe dials it as ws:// (https becomes wss://); the http probe
	// accepts ws and wss as http and https. The tcp probe dials its host
	// and port (80 or 443 by scheme when the URL has none) and also accepts
	// a bare host:port. Required: there is no default.
	Endpoint string
	// Path is joined to the Endpoint's path and may carry a query. For ws
	// it is the serving path, /node/{target}; for http and auto the path of
	// the GET. Unused by tcp. Zero: the Endpoint's own path.
	Path string
	// WSPath is the path of an auto probe's WebSocket upgrade, joined like
	// Path. Unused by the other kinds. Zero: Path.
	WSPath string
	// AltPaths are further GETs an auto probe tries after Path, in order,
	// each with its own status rules: the health paths of the apps that
	// run in the home, which are also its real serving path. Unused by the
	// other kinds. Zero: none.
	AltPaths []Path
	// Header is sent on every ws and http attempt, typically the relay
	// token in X-Wakegate-Relay; a Host entry sets the request host. The
	// ws probe refuses Upgrade, Connection and Sec-Websocket-* headers.
	// Zero: no extra headers.
	Header http.Header
	// API selects the http status rules. 2xx and 3xx always pass (redirects
	// are not followed); with API set, 401 and 403 pass too, because an
	// API's auth boundary answered. Every other status, 400, 404 and 5xx
	// among them, fails. Zero: UI rules.
	API bool
	// Statuses, when set, are the only statuses an http probe's GET, and
	// an auto probe's GET of Path, pass on, in place of the UI and API
	// rules (the GETs of an auto probe's AltPaths keep their own rules).
	// Zero: the rules.
	Statuses []int
	// AttemptTimeout bounds one attempt: dial, handshake and, for ws, the
	// settle window. Zero or negative: 2s.
	AttemptTimeout time.Duration
	// WSTimeout bounds an auto probe's WebSocket handshake (dial, upgrade
	// request and its answer); an upgrade left unanswered that long, or
	// one the home closes without an answer, falls back to the GETs
	// within the same attempt. The settle window after a 101 is not
	// counted. Unused by the other kinds (a ws probe's handshake has the
	// whole attempt). Zero or negative: 1s; a value above half of
	// AttemptTimeout is lowered to it, so the GETs keep time.
	WSTimeout time.Duration
	// Settle is how long an upgraded ws probe waits. It passes early when a
	// first message arrives, and passes at the end of the window if the
	// socket is still open. It must be shorter than AttemptTimeout. Unused
	// by http and tcp. Zero or negative: 100ms.
	Settle time.Duration
	// MinPause is the pause after the first failed attempt; each later
	// pause doubles, up to MaxPause. Zero or negative: 2ms.
	MinPause time.Duration
	// MaxPause caps the pause between attempts. Zero or negative: 100ms;
	// a value below MinPause is raised to MinPause.
	MaxPause time.Duration
	// PortWatch is how often, during a pause after an attempt whose
	// connection was refused, the endpoint's port is checked with a bare
	// TCP connect; the pause ends as soon as the port accepts, so a home
	// that starts listening mid-pause is probed at once instead of up to
	// MaxPause later. A refused connect costs both sides microseconds.
	// Zero: 2ms. Negative: off.
	PortWatch time.Duration
	// NotFoundSettle is how long an auto probe goes on while every answer
	// of every attempt is 404 (the upgrade and each GET) before it gives
	// up with ErrNotFound, instead of waiting out its ctx: a home
	// that answers 404 everywhere for that long serves none of the probed
	// paths, and more time will not change that. At least
	// NotFoundMinAttempts such attempts are made. Any other answer starts
	// the window again, so a home that 404s for a moment during its boot
	// is still waited for. Unused by the other kinds. Zero:
	// DefaultNotFoundSettle; negative: never give up early.
	NotFoundSettle time.Duration
	// OnAttempt, if set, is called after each attempt that did not pass,
	// with the result so far; it must return quickly. Zero: none.
	OnAttempt func(Result)
}

// Path is one GET of an auto probe: a path joined to the endpoint like
// Spec.Path, and the status rules it is judged by (API as in
// Spec).
type Path struct {
	Path string
	API  bool
}

// Result reports what a probe saw.
type Result struct {
	// Attempts is the number of attempts made.
	Attempts int
	// Status is the HTTP status of the last attempt: the http response
	// status or the ws handshake status (101 after an upgrade). It is 0
	// when the last attempt got no HTTP answer, and always 0 for tcp.
	Status int
	// Signalled is true when the ready channel was closed during the probe
	// (the home said it is ready), which made the next attempt run at once.
	// It never makes a probe pass by itself.
	Signalled bool
	// Last is the last attempt's error, nil when the last attempt passed.
	// An attempt cut short by a cancelled ctx reports context.Canceled.
	Last error
	// Note, for an auto probe that passed on a GET after its WebSocket
	// upgrade got no answer, says so and names the setting that skips the
	// upgrade; "" otherwise. It is for the operator's log.
	Note string
}

// Probe repeats attempts until one passes or ctx is done. Each attempt is
// bounded by AttemptTimeout and by ctx. Failed attempts are followed by a
// pause that starts at MinPause and doubles up to MaxPause; the pause ends
// early when ctx ends, when the port watch sees the port accept, or when
// ready is closed (the home called POST /_wakegate/ready): the home's ready
// signal makes the next attempt run at once, once, and never declares the
// home ready by itself (DESIGN.md, rule 3). A nil ready never signals.
//
// At least one attempt is always made: when ctx is already done at the
// call, the first attempt runs bounded by AttemptTimeout alone. The only
// exception is a spec that cannot be attempted (unknown kind, unusable
// Endpoint or Path, Settle not shorter than AttemptTimeout), which returns
// an error with no attempt.
//
// Probe returns nil when an attempt passed, and otherwise an error that
// wraps both ctx.Err() and the last attempt's error. No goroutine or timer
// started by Probe outlives the call, and the probe's connections are
// closed before it returns.
func Run(ctx context.Context, s Spec, ready <-chan struct{}) (Result, error) {
	var res Result
	s = probeDefaults(s)
	run, err := probeNewRun(s)
	if err != nil {
		return res, fmt.Errorf("wake: probe %s %q: %w", s.Kind, s.Endpoint, err)
	}
	defer run.close()
	p := probePauser{spec: run.spec, run: run, ready: ready, pause: s.MinPause}
	defer p.stop()

	// A caller that is already out of time still gets one complete attempt.
	detached := ctx.Err() != nil
	for {
		base := ctx
		if detached && res.Attempts == 0 {
			base = context.WithoutCancel(ctx)
		}
		attemptCtx, cancelAttempt := context.WithTimeout(base, s.AttemptTimeout)
		status, err := run.attempt(attemptCtx)
		cut := attemptCtx.Err() != nil && ctx.Err() != nil
		cancelAttempt()
		res.Attempts++
		res.Status = status
		res.Last = err
		if err == nil {
			res.Note = run.note
			return res, nil
		}
		if !cut {
			run.answer = err // what the home said, not what the deadline did
			if s.OnAttempt != nil {
				s.OnAttempt(res)
			}
			if gone := run.notFound.note(err, s.NotFoundSettle); gone != nil {
				return res, gone
			}
		}
		if ctx.Err() != nil {
			return res, run.fail(ctx, res)
		}
		// A socket endpoint's file missing (ENOENT) is a port not yet
		// open: the home has not bound it yet.
		closed := errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
		if !p.wait(ctx, closed, &res) {
			return res, run.fail(ctx, res)
		}
	}
}

// probePauser is the pause between two attempts of one Probe call.
type probePauser struct {
	spec  Spec
	run   *probeRun
	ready <-chan struct{} // nil once its signal was taken
	pause time.Duration

	timer, poll *time.Timer
}

// wait pauses after a failed attempt and reports whether the next attempt
// should run (false: ctx ended). refused says whether the attempt's
// connection was refused (or its socket file is missing), which turns on
// the port watch.
func (p *probePauser) wait(ctx context.Context, refused bool, res *Result) bool {
	if probeClosed(p.ready) {
		// The signal came during the attempt: the next one runs at once.
		p.ready, res.Signalled = nil, true
		return true
	}
	if p.timer == nil {
		p.timer = time.NewTimer(p.pause)
	} else {
		p.timer.Reset(p.pause)
	}
	watch := p.spec.PortWatch > 0 && refused
	if watch {
		if p.poll == nil {
			p.poll = time.NewTimer(p.spec.PortWatch)
		} else {
			p.poll.Reset(p.spec.PortWatch)
		}
		defer p.poll.Stop()
	}
	defer p.timer.Stop()
	for {
		select {
		case <-p.timer.C:
			p.grow()
			return true
		case <-pollC(p.poll, watch):
			if p.run.portOpen(ctx) {
				p.grow()
				return true
			}
			p.poll.Reset(p.spec.PortWatch)
		case <-p.ready:
			p.ready, res.Signalled = nil, true
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// grow doubles the pause, up to MaxPause.
func (p *probePauser) grow() {
	if p.pause > p.spec.MaxPause/2 {
		p.pause = p.spec.MaxPause
	} else {
		p.pause *= 2
	}
}

// stop stops the pauser's timers.
func (p *probePauser) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.poll != nil {
		p.poll.Stop()
	}
}

// pollC returns the port-watch timer's channel while watching, else nil
// (a nil channel never fires in a select).
func pollC(t *time.Timer, watching bool) <-chan time.Time {
	if !watching {
		return nil
	}
	return t.C
}

// portOpen reports whether the endpoint's port accepts a TCP connection.
func (r *probeRun) portOpen(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, r.spec.AttemptTimeout)
	defer cancel()
	c, err := r.dial(ctx, "tcp", r.hostport)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// probeDefaults fills the zero fields of s with their defaults.
func probeDefaults(s Spec) Spec {
	if s.Kind == "" {
		s.Kind = WS
	}
	if s.AttemptTimeout <= 0 {
		s.AttemptTimeout = probeDefaultAttemptTimeout
	}
	if s.WSTimeout <= 0 {
		s.WSTimeout = probeDefaultWSTimeout
	}
	s.WSTimeout = min(s.WSTimeout, s.AttemptTimeout/2)
	if s.Settle <= 0 {
		s.Settle = probeDefaultSettle
	}
	if s.MinPause <= 0 {
		s.MinPause = probeDefaultMinPause
	}
	if s.MaxPause <= 0 {
		s.MaxPause = probeDefaultMaxPause
	}
	if s.PortWatch == 0 {
		s.PortWatch = probeDefaultPortWatch
	}
	if s.NotFoundSettle == 0 {
		s.NotFoundSettle = DefaultNotFoundSettle
	}
	if s.MaxPause < s.MinPause {
		s.MaxPause = s.MinPause
	}
	return s
}

// probeClosed reports whether ch is closed. A nil channel is never closed.
func probeClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// probeRun holds what the attempts of one Probe call share.
type probeRun struct {
	spec     Spec
	target   string // URL for ws and http, host:port for tcp
	hostport string // the endpoint's host:port, for the port watch
	// dial dials through endpoint.Target: a socket endpoint's stand-in
	// host is dialled as its socket.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// answer is the error of the last attempt that ended on its own, not
	// cut short by the caller's ctx.
	answer error
	// wsTarget and alts are the upgrade URL and the further GETs of an
	// auto probe, whose target is its first GET (probe_auto.go).
	wsTarget string
	alts     []probeAlt
	// notFound follows a run of auto attempts that got only 404s
	// (probe_auto.go).
	notFound notFoundRun
	// note is the passing auto attempt's account of an upgrade that got no
	// answer (Result.Note).
	note string
	// transport and client are set for http and auto probes only.
	transport *http.Transport
	client    *http.Client
}

// probeNewRun checks s and builds the dialer and, for http, the client.
func probeNewRun(s Spec) (*probeRun, error) {
	r := &probeRun{spec: s, dial: endpoint.Dialer(&net.Dialer{})}
	var err error
	switch s.Kind {
	case WS:
		if s.Settle >= s.AttemptTimeout {
			return nil, fmt.Errorf("settle %v must be shorter than attempt timeout %v", s.Settle, s.AttemptTimeout)
		}
		r.target, err = URL(s.Endpoint, s.Path, probeWSSchemes)
	case HTTP:
		r.target, err = URL(s.Endpoint, s.Path, probeHTTPSchemes)
		if err == nil {
			r.newClient()
		}
	case Auto:
		err = r.newAuto()
	case TCP:
		r.target, err = HostPort(s.Endpoint)
	default:
		return nil, fmt.Errorf("unknown probe kind %q", s.Kind)
	}
	if err != nil {
		return nil, err
	}
	if r.hostport, err = HostPort(s.Endpoint); err != nil {
		r.spec.PortWatch = -1 // no port to watch; pauses run their full length
	}
	return r, nil
}

// probeHTTPSchemes maps an endpoint's scheme to the scheme of an HTTP GET.
var probeHTTPSchemes = map[string]string{"http": "http", "https": "https", "ws": "http", "wss": "https"}

// probeWSSchemes maps an endpoint's scheme to the scheme of an upgrade.
var probeWSSchemes = map[string]string{"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}

// newClient builds the HTTP client of http and auto probes.
func (r *probeRun) newClient() {
	r.transport = &http.Transport{
		Proxy:               nil, // upstreams are dialled directly, never through an environment proxy
		DialContext:         r.dial,
		DisableKeepAlives:   true, // every attempt proves a fresh connection
		DisableCompression:  true,
		TLSHandshakeTimeout: r.spec.AttemptTimeout,
	}
	r.client = &http.Client{
		Transport: r.transport,
		// A redirect is an answer of the serving path; where it
		// points is not probed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// URL joins endpoint and path and maps the endpoint's scheme through
// schemes; a scheme that is not a key of schemes is refused.
func URL(ep, path string, schemes map[string]string) (string, error) {
	u, err := url.Parse(endpoint.HTTP(ep))
	if err != nil {
		return "", fmt.Errorf("parse endpoint: %w", err)
	}
	scheme, ok := schemes[strings.ToLower(u.Scheme)]
	if !ok {
		return "", fmt.Errorf("endpoint %q: unsupported scheme %q", ep, u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("endpoint %q has no host", ep)
	}
	u.Scheme = scheme
	u.Fragment, u.RawFragment = "", ""
	if path != "" {
		p, err := url.Parse(path)
		if err != nil {
			return "", fmt.Errorf("parse path: %w", err)
		}
		if p.Scheme != "" || p.Host != "" {
			return "", fmt.Errorf("path %q is not a path", path)
		}
		u = u.JoinPath(p.EscapedPath())
		if p.RawQuery != "" {
			u.RawQuery = p.RawQuery
		}
	}
	return u.String(), nil
}

// HostPort returns the host:port a tcp probe dials: endpoint itself when
// it has no scheme, otherwise the URL's host with its port or the scheme's.
func HostPort(ep string) (string, error) {
	if !strings.Contains(ep, "://") {
		if _, _, err := net.SplitHostPort(ep); err != nil {
			return "", fmt.Errorf("endpoint %q: %w", ep, err)
		}
		return ep, nil
	}
	u, err := url.Parse(endpoint.HTTP(ep))
	if err != nil {
		return "", fmt.Errorf("parse endpoint: %w", err)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("endpoint %q has no host", ep)
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http", "ws":
			port = "80"
		case "https", "wss":
			port = "443"
		default:
			return "", fmt.Errorf("endpoint %q has no port", ep)
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// attempt runs one attempt of the run's kind and returns the HTTP status it
// saw (0 if none) and nil if the attempt passed.
func (r *probeRun) attempt(ctx context.Context) (int, error) {
	switch r.spec.Kind {
	case WS:
		status, _, err := r.attemptWS(ctx, r.target, r.spec.AttemptTimeout)
		return status, err
	case HTTP:
		code, err := r.attemptHTTP(ctx, r.target, r.spec.API)
		if len(r.spec.Statuses) > 0 && code != 0 {
			// The home's own list decides, whatever the rules said.
			if slices.Contains(r.spec.Statuses, code) {
				return code, nil
			}
			return code, fmt.Errorf("http get: %w", StatusError(code))
		}
		return code, err
	case Auto:
		return r.attemptAuto(ctx)
	default:
		return 0, r.attemptTCP(ctx)
	}
}

// fail builds the error of a probe that ran out of ctx. When the last
// attempt was cut short by ctx, the last attempt that ended on its own (a
// refused dial, a 404) is wrapped too: it is what the home said, so it
// comes before the cut attempt when the chain is searched (errors.As finds
// the 404s, not the deadline, and the hint follows them).
func (r *probeRun) fail(ctx context.Context, res Result) error {
	msg := fmt.Sprintf("wake: probe %s %s: not ready after %d attempts: %v; last attempt: %v",
		r.spec.Kind, r.target, res.Attempts, ctx.Err(), res.Last)
	if r.answer != nil && r.answer != res.Last {
		msg += fmt.Sprintf("; last answer: %v", r.answer)
		return &probeFailure{msg: msg, errs: []error{ctx.Err(), r.answer, res.Last}}
	}
	return &probeFailure{msg: msg, errs: []error{ctx.Err(), res.Last}}
}

// probeFailure is a probe that ran out of time: its message names the
// last attempt and the last answer, and its chain holds the cause, the
// home's last answer and then the last attempt.
type probeFailure struct {
	msg  string
	errs []error
}

// Error is the probe's failure as one line.
func (e *probeFailure) Error() string { return e.msg }

// Unwrap is the failure's chain, the home's answer before the cut attempt.
func (e *probeFailure) Unwrap() []error { return e.errs }

// close releases what the run holds.
func (r *probeRun) close() {
	if r.transport != nil {
		r.transport.CloseIdleConnections()
	}
}

// attemptTCP opens and closes one connection.
func (r *probeRun) attemptTCP(ctx context.Context) error {
	c, err := r.dial(ctx, "tcp", r.target)
	if err != nil {
		return fmt.Errorf("tcp dial: %w", err)
	}
	_ = c.Close() // the connection opened; that is all a tcp probe proves
	return nil
}

// attemptHTTP sends one GET to target and judges its status by the UI or,
// with api, the API rules.
func (r *probeRun) attemptHTTP(ctx context.Context, target string, api bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, fmt.Errorf("http request: %w", err)
	}
	req.Host = endpoint.HostHeader(req.URL.Host)
	if r.spec.Header != nil {
		req.Header = r.spec.Header.Clone()
		if host := req.Header.Get("Host"); host != "" {
			req.Host = host
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("http get: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, DrainLimit))
	_ = resp.Body.Close()
	if StatusPasses(resp.StatusCode, api) {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("http get: %w", StatusError(resp.StatusCode))
}

// StatusPasses applies the status rules of DESIGN rule 12 to an answer
// of a probe, a health check or the self-probe: 2xx and 3xx pass; with
// api, 401 and 403 pass too (an API's auth boundary answered); nothing
// else does.
func StatusPasses(code int, api bool) bool {
	switch {
	case code >= 200 && code < 400:
		return true
	case api && (code == http.StatusUnauthorized || code == http.StatusForbidden):
		return true
	default:
		return false
	}
}

// errWSProbe marks a failed WebSocket handshake of a ws probe.
var errWSProbe = errors.New("ws handshake")

// StatusError is an HTTP status that does not pass.
type StatusError int

func (e StatusError) Error() string {
	return fmt.Sprintf("status %d %s", int(e), http.StatusText(int(e)))
}

// probeConn is a probe's WebSocket connection: once the attempt's context
// is done, any deadline set on it is replaced by one already expired, so the
// handshake cannot undo the cancellation by setting its own deadline.
type probeConn struct {
	net.Conn
	ctx context.Context
}

// SetDeadline sets t, or an expired deadline once the attempt is over.
func (c probeConn) SetDeadline(t time.Time) error {
	if c.ctx.Err() != nil {
		t = time.Unix(1, 0)
	}
	return c.Conn.SetDeadline(t)
}

// attemptWS upgrades at target, its handshake bounded by handshake, then
// waits for a first message or the settle window, and closes with a
// normal-closure frame. dialled says whether the connection opened (an
// error with dialled and no status is an upgrade the home got but did not
// answer).
func (r *probeRun) attemptWS(ctx context.Context, target string, handshake time.Duration) (status int, dialled bool, err error) {
	// The handshake honours only ctx's deadline, and the settle read only
	// its own deadline, so a cancellation of ctx (the ready signal or the
	// caller) expires the connection's read deadline instead.
	var stopWatch func() bool
	watchDone := make(chan struct{})
	defer func() {
		if stopWatch != nil && !stopWatch() {
			<-watchDone
		}
	}()
	d := websocket.Dialer{
		HandshakeTimeout: handshake,
		NetDialContext: func(dialCtx context.Context, network, addr string) (net.Conn, error) {
			c, err := r.dial(dialCtx, network, addr)
			if err != nil {
				return nil, err
			}
			dialled = true
			stopWatch = context.AfterFunc(ctx, func() {
				defer close(watchDone)
				_ = c.SetReadDeadline(time.Unix(1, 0)) // already expired
			})
			return probeConn{Conn: c, ctx: ctx}, nil
		},
	}
	header := r.spec.Header
	if u, perr := url.Parse(target); perr == nil && endpoint.IsStandIn(u.Host) && header.Get("Host") == "" {
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Host", endpoint.StandInHost)
	}
	conn, resp, err := d.DialContext(ctx, target, header)
	if resp != nil {
		status = resp.StatusCode
		_ = resp.Body.Close()
	}
	if err != nil {
		if errors.Is(err, websocket.ErrBadHandshake) && resp != nil {
			return status, dialled, fmt.Errorf("%w: %w", errWSProbe, StatusError(status))
		}
		if ctx.Err() != nil {
			return status, dialled, fmt.Errorf("ws dial: %w: %w", ctx.Err(), err)
		}
		return status, dialled, fmt.Errorf("ws dial: %w", err)
	}
	defer func() {
		msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
		_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(probeCloseWait))
		_ = conn.Close()
	}()

	if err := conn.SetReadDeadline(time.Now().Add(r.spec.Settle)); err != nil {
		return status, dialled, fmt.Errorf("ws settle: %w", err)
	}
	// Checked after the deadline is set: a cancellation that came before
	// it is caught here, one after it expires the deadline.
	if ctx.Err() != nil {
		return status, dialled, fmt.Errorf("ws settle: %w", ctx.Err())
	}
	_, _, err = conn.NextReader()
	if err == nil {
		return status, dialled, nil // a first message arrived
	}
	if ctx.Err() != nil {
		return status, dialled, fmt.Errorf("ws settle: %w: %w", ctx.Err(), err)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return status, dialled, nil // the socket stayed open through the window
	}
	if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
		ce.Text = fault.Excerpt(ce.Text) // the home's words, bound for logs and records
	}
	return status, dialled, fmt.Errorf("ws settle: %w", err)
}
