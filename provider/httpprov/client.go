// Package httpprov is the http provider: homes run by the operator's own
// control plane behind a small webhook contract (docs/http-provider.md).
// Wakegate POSTs wake, suspend, stop and recreate to
// {base}/homes/{id}/{op} and GETs {base}/homes/{id} for the state; every
// request is signed with HMAC-SHA256 over its method, path, timestamp,
// nonce, idempotency key and body. A slow wake is answered 202 and polled
// (or long-polled) until the home runs or the wake's deadline passes.
//
// Verifier is the other side, for a control plane written in Go.
package httpprov

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// Config configures the client. Zero fields take their defaults in New.
type Config struct {
	// BaseURL is the control plane's base URL, e.g.
	// https://cp.example.com/wakegate. Required; http or https.
	BaseURL string
	// Secret is the HMAC key shared with the control plane. Required, at
	// least 16 bytes.
	Secret []byte
	// RequestTimeout bounds one HTTP request (one attempt). Default 10s.
	RequestTimeout time.Duration
	// PollInterval is the pause between two status polls of a slow
	// operation when the control plane sends no Retry-After. Default 1s.
	PollInterval time.Duration
	// LongPoll is the longest wait a status poll asks of the control
	// plane (?wait=...&timeout=). Default 10s; a control plane that does
	// not long-poll answers at once.
	LongPoll time.Duration
	// Retries is how many times a request is retried after a connection
	// failure, 429 or 5xx, always within the operation's deadline.
	// Default 4; -1 means never.
	Retries int
	// OpTimeout bounds an operation whose context has no deadline.
	// Default 2m.
	OpTimeout time.Duration
	// Client sends the requests; nil means a client of its own.
	Client *http.Client
	// Now is the clock the signatures use; nil means time.Now.
	Now func() time.Time
}

// Provider runs homes through a control plane. Safe for concurrent use.
type Provider struct {
	c    Config
	base *url.URL
}

// New checks c, fills its defaults and returns the provider.
func New(c Config) (*Provider, error) {
	u, err := url.Parse(strings.TrimSuffix(c.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http provider: base_url %q: want an http or https URL", c.BaseURL)
	}
	if len(c.Secret) < 16 {
		return nil, errors.New("http provider: secret: want at least 16 bytes")
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.LongPoll <= 0 {
		c.LongPoll = 10 * time.Second
	}
	if c.Retries == 0 {
		c.Retries = 4
	} else if c.Retries < 0 {
		c.Retries = 0
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 2 * time.Minute
	}
	if c.Client == nil {
		c.Client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Provider{c: c, base: u}, nil
}

// Name returns "http".
func (p *Provider) Name() string { return "http" }

// Wake asks the control plane to start or resume the home and waits until
// it reports the home running with an endpoint.
func (p *Provider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	return p.bring(ctx, OpWake, s)
}

// Recreate asks the control plane to replace the home with one running
// s.Version (its image and command), keeping its data, and waits until it
// runs.
func (p *Provider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	return p.bring(ctx, OpRecreate, s)
}

// bring runs a wake or a recreate and waits for the home to run.
func (p *Provider) bring(ctx context.Context, op string, s provider.Spec) (provider.Result, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	a, err := p.post(ctx, op, s)
	if err != nil {
		return provider.Result{}, err
	}
	a, err = p.await(ctx, op, s.ID, a, phaseRunning)
	if err != nil {
		return provider.Result{}, err
	}
	return p.result(op, a)
}

// Suspend asks the control plane to pause the home. A control plane that
// cannot suspend answers 501, and Suspend returns provider.ErrUnsupported.
func (p *Provider) Suspend(ctx context.Context, s provider.Spec) error {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	a, err := p.post(ctx, OpSuspend, s)
	if err != nil {
		return err
	}
	_, err = p.await(ctx, OpSuspend, s.ID, a, phaseSuspended)
	return err
}

// Stop asks the control plane to stop the home and waits until it reports
// the home stopped; proven says it did.
func (p *Provider) Stop(ctx context.Context, s provider.Spec) (bool, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	a, err := p.post(ctx, OpStop, s)
	if err != nil {
		return false, err
	}
	if _, err := p.await(ctx, OpStop, s.ID, a, phaseStopped); err != nil {
		return false, err
	}
	return true, nil
}

// Status reads the home's state from the control plane; paused and
// standby read as suspended.
func (p *Provider) Status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	a, _, err := p.get(ctx, "status", s.ID, "")
	if err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Endpoint: a.Endpoint, Ref: a.Ref, State: NormalizeState(a.State), Reason: a.Reason}, nil
}

// Version returns the version the control plane reports the home runs;
// when it reports none, the home itself is asked at GET {endpoint}/version.
func (p *Provider) Version(ctx context.Context, s provider.Spec) (string, error) {
	ctx, cancel := p.bound(ctx)
	defer cancel()
	a, _, err := p.get(ctx, "version", s.ID, "")
	if err != nil {
		return "", err
	}
	if a.Version != "" {
		return a.Version, nil
	}
	if a.Endpoint == "" {
		return "", badAnswer("version", errors.New("the control plane reports neither a version nor an endpoint"))
	}
	return p.askHome(ctx, s.ID, a.Endpoint)
}

// askHome reads GET {endpoint}/version from the home itself.
func (p *Provider) askHome(ctx context.Context, id, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("http provider: version %s: %w", id, err)
	}
	res, err := provider.HomeClient(p.c.Client).Do(req)
	if err != nil {
		return "", fmt.Errorf("http provider: version %s: ask the home: %w", id, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256))
	if err != nil {
		return "", fmt.Errorf("http provider: version %s: ask the home: %w", id, err)
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("http provider: version %s: the home answered %d", id, res.StatusCode)
	}
	v, err := provider.VersionText(string(b))
	if err != nil {
		return "", fmt.Errorf("http provider: version %s: %w", id, err)
	}
	return v, nil
}

// bound gives ctx the default operation deadline when it has none.
func (p *Provider) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.c.OpTimeout)
}

// result turns the answer of a finished wake or recreate into a Result.
func (p *Provider) result(op string, a Answer) (provider.Result, error) {
	u, err := url.Parse(a.Endpoint)
	if a.Endpoint == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return provider.Result{}, badAnswer(op, fmt.Errorf("state running with endpoint %q: want an http or https URL", a.Endpoint))
	}
	return provider.Result{Endpoint: a.Endpoint, Ref: a.Ref, State: provider.StateRunning}, nil
}

// Close lets go of the idle connections to the control plane.
func (p *Provider) Close() error {
	p.c.Client.CloseIdleConnections()
	return nil
}

var _ provider.Provider = (*Provider)(nil)
