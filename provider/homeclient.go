package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/fault"
)

// A home runs other people's code: what it answers is untrusted, and a
// redirect it answers must not send the gateway anywhere else (an
// internal address, the admin listener, a cloud metadata endpoint). Every
// client that asks a home something (the version checks here; the
// readiness probes, the self-probe and the app health checks in wake and
// gateway) answers a redirect with the redirect itself, which counts as a
// failed answer where a version is wanted.

// NoRedirect is a CheckRedirect that follows no redirect: the client
// returns the 3xx answer itself.
func NoRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// HomeClient returns a client that sends through c's transport (or
// http.DefaultTransport when c is nil) and follows no redirect.
func HomeClient(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{CheckRedirect: NoRedirect}
	}
	hc := *c
	hc.CheckRedirect = NoRedirect
	return &hc
}

// MaxVersionLen bounds a version a home reports.
const MaxVersionLen = 128

// VersionText checks the text a home gave as its version, trimmed: at
// most MaxVersionLen bytes of printable characters, none empty. A refusal
// quotes the text as a bounded, escaped excerpt only.
func VersionText(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return "", errors.New("empty version")
	}
	if len(v) > MaxVersionLen {
		return "", fmt.Errorf("the version answer is longer than %d bytes: %s", MaxVersionLen, fault.Excerpt(v))
	}
	for _, r := range v {
		if r < ' ' || r == 0x7f || r == '\uFFFD' || (r >= 0x80 && r < 0xa0) {
			return "", fmt.Errorf("the version answer holds control characters: %s", fault.Excerpt(v))
		}
	}
	return v, nil
}

// AskVersion asks the home at endpoint (a base URL) for GET /version
// through c (a HomeClient) and returns the version it answers, checked by
// VersionText. An answer that is not 2xx is an error naming its status.
func AskVersion(ctx context.Context, c *http.Client, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/version", nil)
	if err != nil {
		return "", err
	}
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4096))
	if err != nil {
		return "", err
	}
	if res.StatusCode/100 != 2 {
		return "", fmt.Errorf("status %d", res.StatusCode)
	}
	return VersionText(string(body))
}
