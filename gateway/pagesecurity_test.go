package gateway_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// wtCSPNonce finds the nonce of a page's script-src.
var wtCSPNonce = regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9+/=_-]{16,})'`)

// The waiting page, the public error pages (and their JSON answers) and
// the root page forbid framing and carry a Content-Security-Policy that
// allows nothing by default: the waiting page's own script and style run
// under a nonce fresh for each answer.
func TestWaitingAndErrorPagesCarryCSP(t *testing.T) {
	gw := wtStart(t, "")
	c := e2eClient(t)
	check := func(what string, res *http.Response) string {
		t.Helper()
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "base-uri 'none'") {
			t.Errorf("%s: Content-Security-Policy %q; want default-src 'none', base-uri 'none' and frame-ancestors 'none'", what, csp)
		}
		if got := res.Header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q; want DENY", what, got)
		}
		return csp
	}

	nonces := map[string]bool{}
	for range 2 {
		res, body := e2eGet(t, c, "http://"+gw.addr+"/node/slow/", wtNav)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `id="progress"`) {
			t.Fatalf("waiting page: %d %.200s", res.StatusCode, body)
		}
		csp := check("waiting page", res)
		m := wtCSPNonce.FindStringSubmatch(csp)
		if m == nil || !strings.Contains(csp, "style-src 'nonce-"+m[1]+"'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Fatalf("waiting page: Content-Security-Policy %q; want a nonce for script and style, and connect-src 'self'", csp)
		}
		if strings.Count(string(body), `nonce="`+m[1]+`"`) != 2 {
			t.Errorf("waiting page: its script and style do not carry the nonce %s", m[1])
		}
		nonces[m[1]] = true
	}
	if len(nonces) != 2 {
		t.Errorf("two waiting pages shared their nonce")
	}

	res, body := e2eGet(t, c, "http://"+gw.addr+"/node/nobody/", wtNav)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("error page: %d %s", res.StatusCode, body)
	}
	if csp := check("error page", res); strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "script-src") {
		t.Errorf("error page: Content-Security-Policy %q allows scripts or inline styles", csp)
	}
	res, _ = e2eGet(t, c, "http://"+gw.addr+"/node/nobody/", http.Header{"Accept": {"application/json"}})
	check("JSON error", res)
	res, _ = e2eGet(t, c, "http://"+gw.addr+"/", wtNav)
	check("root page", res)
}
