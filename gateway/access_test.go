package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// faConfig is homeConfig with a forward_auth policy at url as the default.
func faConfig(t *testing.T, url, extra string, home, app *hardUpstream) string {
	return homeConfig(t, fmt.Sprintf(`access:
  default: sso
  policies:
    - name: sso
      type: forward_auth
      forward_auth:
        url: %q
        timeout: 300ms
        request_headers: [Cookie]
        response_headers: [X-User]
%s`, url, extra), home, app)
}

// A forward_auth service's 2xx lets the request through with only the
// configured response headers copied (a caller's own X-User is dropped);
// its 302 and 401 reach the browser unchanged and nothing is forwarded.
func TestAccessForwardAuth(t *testing.T) {
	var asked atomic.Int32
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		switch c := r.Header.Get("Cookie"); {
		case c == "session=good" && r.Header.Get("X-Forwarded-Uri") == "/node/h/x?q=1" && r.Header.Get("X-Forwarded-Method") == "POST":
			w.Header().Set("X-User", "alice")
			w.Header().Set("X-Secret", "never-upstream")
		case c == "session=api":
			w.Header().Set("Www-Authenticate", `Bearer realm="sso"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("sso says no"))
		default:
			http.Redirect(w, r, "https://login.example/?next="+r.Header.Get("X-Forwarded-Uri"), http.StatusFound)
		}
	}))
	defer auth.Close()
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, faConfig(t, auth.URL, "", home, app))

	res, body := hardExchange(t, addr, "POST /node/h/x?q=1 HTTP/1.1\r\nHost: gw\r\nCookie: session=good\r\nX-User: mallory\r\nX_User: mallory\r\nContent-Length: 0\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("allowed: %d %s", res.StatusCode, body)
	}
	got := home.last(t)
	if v := got.Header.Values("X-User"); len(v) != 1 || v[0] != "alice" {
		t.Errorf("X-User at the home = %q; want the auth service's alice only", v)
	}
	if got.Header.Get("X-Secret") != "" {
		t.Errorf("an unlisted auth response header reached the home")
	}

	n := len(home.seen())
	res, body = hardExchange(t, addr, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nAccept: text/html\r\n\r\n")
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "https://login.example/?next=/node/h/x" {
		t.Errorf("login redirect: %d Location %q (%s)", res.StatusCode, res.Header.Get("Location"), body)
	}
	res, body = hardExchange(t, addr, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nCookie: session=api\r\n\r\n")
	if res.StatusCode != 401 || body != "sso says no" || res.Header.Get("Www-Authenticate") != `Bearer realm="sso"` {
		t.Errorf("401 from the auth service: %d %q %v", res.StatusCode, body, res.Header)
	}
	if len(home.seen()) != n {
		t.Errorf("a refused request reached the home")
	}
}

// An auth service that is down, or answers slower than its timeout, or
// fails, refuses the request (503 auth_unavailable): it fails closed.
func TestAccessForwardAuthFailsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	_ = ln.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer broken.Close()
	for name, url := range map[string]string{"down": down, "slow": slow.URL, "broken": broken.URL} {
		home := newHardUpstream(t, nil)
		addr := hardGateway(t, faConfig(t, url, "", home, newHardUpstream(t, nil)))
		res, body := hardExchange(t, addr, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nCookie: session=good\r\n\r\n")
		if res.StatusCode != 503 || !strings.Contains(body, `"auth_unavailable"`) || strings.Contains(body, "127.0.0.1") {
			t.Errorf("%s: %d %s; want 503 auth_unavailable without the service's address", name, res.StatusCode, body)
		}
		if len(home.seen()) != 0 {
			t.Errorf("%s: the request reached the home", name)
		}
	}
}

// A cached decision answers without asking the auth service again.
func TestAccessForwardAuthCache(t *testing.T) {
	var asked atomic.Int32
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("X-User", "u-"+r.Header.Get("Cookie"))
	}))
	defer auth.Close()
	home := newHardUpstream(t, nil)
	addr := hardGateway(t, faConfig(t, auth.URL, "        cache_ttl: 1h\n", home, newHardUpstream(t, nil)))
	for _, c := range []string{"a", "a", "b", "a"} {
		if res, body := hardExchange(t, addr, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nCookie: "+c+"\r\n\r\n"); res.StatusCode != 200 {
			t.Fatalf("%d %s", res.StatusCode, body)
		}
		if v := home.last(t).Header.Get("X-User"); v != "u-"+c {
			t.Errorf("X-User %q; want u-%s", v, c)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("auth service asked %d times; want 2 (one per cookie)", n)
	}
}

// Identity headers from an untrusted peer, in any spelling, never reach a
// home; the gateway's own X-Forwarded-* and X-Real-Ip do. From a trusted
// proxy, the configured client-IP header names the client.
func TestAccessIdentityHeaders(t *testing.T) {
	forged := "X-Real-Ip: 1.2.3.4\r\nTrue-Client-Ip: 1.2.3.4\r\nCF-Connecting-IP: 1.2.3.4\r\nFly-Client-Ip: 1.2.3.4\r\n" +
		"X-Client-Ip: 1.2.3.4\r\nX-Original-Forwarded-For: 1.2.3.4\r\nForwarded: for=1.2.3.4\r\nX-Forwarded-For: 1.2.3.4\r\n" +
		"X-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Port: 1\r\nX_Forwarded_For: 1.2.3.4\r\nX_Real_Ip: 1.2.3.4\r\n" +
		"X_Wakegate_Relay: forged\r\nx_wakegate_probe: forged\r\n"
	home := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, "", home, newHardUpstream(t, nil)))
	if res, body := hardExchange(t, addr, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\n"+forged+"\r\n"); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	got := home.last(t).Header
	for k, vs := range got {
		for _, v := range vs {
			if strings.Contains(v, "1.2.3.4") || strings.Contains(v, "forged") || v == "evil" {
				t.Errorf("untrusted: %s: %s reached the home", k, v)
			}
		}
	}
	if got.Get("X-Real-Ip") != "127.0.0.1" || got.Get("X-Forwarded-For") != "127.0.0.1" || got.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("untrusted: gateway's own headers missing: %v", got)
	}

	trusted := hardGateway(t, homeConfig(t, "server:\n  trusted_proxies: [127.0.0.1]\naccess:\n  client_ip_header: Fly-Client-Ip\n",
		home, newHardUpstream(t, nil)))
	if res, body := hardExchange(t, trusted, "GET /node/h/x HTTP/1.1\r\nHost: gw\r\nFly-Client-Ip: 203.0.113.5\r\n\r\n"); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	if v := home.last(t).Header.Get("X-Real-Ip"); v != "203.0.113.5" {
		t.Errorf("trusted: X-Real-Ip %q; want the client-IP header's 203.0.113.5", v)
	}
}

// A path with dot segments is answered 308 to its canonical form and never
// reaches the route it resolves to.
func TestAccessTraversalRedirects(t *testing.T) {
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, "", home, app))
	for _, c := range []struct{ target, loc string }{
		{"/apps/a/../../node/h/whoami", "/node/h/whoami"},
		{"/apps/a/%2e%2e/%2E%2E/node/h/whoami?x=1", "/node/h/whoami?x=1"},
		{"//evil.example/../node/h/", "/node/h/"},
		{"/node/h/./x", "/node/h/x"},
	} {
		res, body := hardExchange(t, addr, "GET "+c.target+" HTTP/1.1\r\nHost: gw\r\n\r\n")
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != c.loc {
			t.Errorf("%s: %d Location %q; want 308 to %s (%s)", c.target, res.StatusCode, res.Header.Get("Location"), c.loc, body)
		}
	}
	if n, m := len(home.seen()), len(app.seen()); n+m != 0 {
		t.Errorf("non-canonical requests reached the home %d times and the app %d times", n, m)
	}
}
