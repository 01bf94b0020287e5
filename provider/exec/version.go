package execprov

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// maxVersionBytes bounds a version answer.
const maxVersionBytes = 4096

// Version asks the running home which version it runs: the trimmed stdout
// of VersionCommand, or the trimmed body of GET {endpoint}/version.
func (e *Provider) Version(ctx context.Context, s provider.Spec) (string, error) {
	v, err := e.version(ctx, s)
	if err != nil {
		return "", fmt.Errorf("exec version %s: %w", s.ID, err)
	}
	return v, nil
}

func (e *Provider) version(ctx context.Context, s provider.Spec) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	h, err := e.homeFor(s.ID)
	if err != nil {
		return "", err
	}
	p, st, err := e.live(ctx, h, s)
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", fmt.Errorf("not running: %w", procid.ErrGone)
	}
	if st.State == 'T' {
		return "", errors.New("home is suspended")
	}
	var v string
	if len(e.cfg.VersionCommand) > 0 {
		v, err = e.versionCommand(ctx, h, p, s)
	} else {
		v, err = e.versionHTTP(ctx, p)
	}
	if err != nil {
		return "", err
	}
	return provider.VersionText(v)
}

func (e *Provider) versionCommand(ctx context.Context, h *home, p *proc, s provider.Spec) (string, error) {
	args := e.expand(e.cfg.VersionCommand, h, p.listenAt, runSpec{version: s.Version, target: s.Target})
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = h.dir
	cmd.Env = e.homeEnv(h, p.listenAt, runSpec{version: s.Version, target: s.Target, env: s.Env, relayToken: s.RelayToken})
	cred, err := e.userOf(h, homeUser(s.Options))
	if err != nil {
		return "", err
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout = &limitedWriter{w: &stdout, n: maxVersionBytes}
	cmd.Stderr = &limitedWriter{w: &stderr, n: maxVersionBytes}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("version command: %w (stderr: %s)", err, fault.Excerpt(strings.TrimSpace(stderr.String())))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (e *Provider) versionHTTP(ctx context.Context, p *proc) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint.HTTP(p.endpoint())+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("version request: %w", err)
	}
	req.Host = endpoint.HostHeader(req.URL.Host)
	resp, err := e.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("version request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVersionBytes))
	if err != nil {
		return "", fmt.Errorf("version response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("version request: status %d", resp.StatusCode)
	}
	return string(body), nil
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	k := len(p)
	if l.n <= 0 {
		return k, nil
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.w.Write(p)
	l.n -= n
	if err != nil {
		return n, err
	}
	return k, nil
}
