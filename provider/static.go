package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Static is a provider for homes that are always on at a fixed endpoint
// (a shared backend, a development server): Wake returns the endpoint and
// the readiness probe still proves it; nothing is ever started or stopped.
// A home's endpoint is its options' endpoint (StaticOptions), or else its
// entry in Endpoints.
type Static struct {
	// Endpoints maps home ids to their base URLs, for homes whose options
	// name none.
	Endpoints map[string]string
	// Client asks homes for their version (following no redirect); nil
	// uses http.DefaultTransport.
	Client *http.Client
}

// Name returns "static".
func (s *Static) Name() string { return "static" }

func (s *Static) endpoint(sp Spec) (string, error) {
	var o StaticOptions
	if err := DecodeOptions(sp.Options, &o); err != nil {
		return "", fmt.Errorf("static provider: home %s: %w", sp.ID, err)
	}
	if o.Endpoint != "" {
		return o.Endpoint, nil
	}
	ep, ok := s.Endpoints[sp.ID]
	if !ok {
		return "", fmt.Errorf("static provider: home %s has no endpoint", sp.ID)
	}
	return ep, nil
}

// Wake returns the home's fixed endpoint.
func (s *Static) Wake(_ context.Context, sp Spec) (Result, error) {
	ep, err := s.endpoint(sp)
	if err != nil {
		return Result{}, err
	}
	return Result{Endpoint: ep, State: StateRunning}, nil
}

// Suspend is not supported: a static home is always on.
func (s *Static) Suspend(context.Context, Spec) error { return ErrUnsupported }

// Stop does nothing and proves nothing: a static home is always on.
func (s *Static) Stop(context.Context, Spec) (bool, error) { return false, nil }

// Recreate is not supported.
func (s *Static) Recreate(context.Context, Spec) (Result, error) {
	return Result{}, ErrUnsupported
}

// Version asks GET {endpoint}/version.
func (s *Static) Version(ctx context.Context, sp Spec) (string, error) {
	ep, err := s.endpoint(sp)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(ep, "/")+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("static provider: version of %s: %w", sp.ID, err)
	}
	res, err := HomeClient(s.Client).Do(req)
	if err != nil {
		return "", fmt.Errorf("static provider: version of %s: %w", sp.ID, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256))
	if err != nil || res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("static provider: version of %s: status %d: %v", sp.ID, res.StatusCode, err)
	}
	v, err := VersionText(string(b))
	if err != nil {
		return "", fmt.Errorf("static provider: version of %s: %w", sp.ID, err)
	}
	return v, nil
}

// Status reports the home as running at its endpoint.
func (s *Static) Status(ctx context.Context, sp Spec) (Result, error) { return s.Wake(ctx, sp) }

var _ Provider = (*Static)(nil)
