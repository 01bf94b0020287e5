package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// fastRouteGateway builds a gateway with one app outside any home
// ("bench"), one app on a home ("inner", on home "demo" at target
// "demo"), host routes, and an upstream that echoes what it received. It
// returns the gateway with the home awake.
func fastRouteGateway(t *testing.T) *Gateway {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s ?%s host=%s\n", r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host)
	}))
	t.Cleanup(up.Close)
	body := fmt.Sprintf(`
hosts:
  apps_domain: apps.test
  nodes_domain: nodes.test
wake:
  warm_ttl: 1h
  idle_timeout: 0s
homes:
  - id: demo
    provider: static
    endpoint: %q
    probe: tcp
apps:
  - slug: bench
    upstream: %q
    kind: api
  - slug: inner
    home: demo
    kind: api
`, up.URL, up.URL)
	g, _ := serveTestGateway(t, "fastroute.yaml", body)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if _, err := g.engine.EnsureAwake(wctx, "demo"); err != nil {
		t.Fatalf("wake demo: %v", err)
	}
	// The self-probe publishes the apps' routes.
	testbin.Eventually(t, "apps published", func() bool {
		for _, slug := range []string{"bench", "inner"} {
			if !g.routeTab.Published(slug) {
				return false
			}
		}
		return true
	})
	return g
}

// rawAnswer is what a test compares of an answer.
type rawAnswer struct {
	status                           int
	location, contentType, allow, id string
	body                             string
}

// rawDo sends one request, written as is (method, request target, Host),
// to the server at addr and reads the answer.
func rawDo(t *testing.T, addr, method, target, host string) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, target, host); err != nil {
		t.Fatal(err)
	}
	req := &http.Request{Method: method}
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, target, host, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{status: res.StatusCode, location: res.Header.Get("Location"), contentType: res.Header.Get("Content-Type"),
		allow: res.Header.Get("Allow"), id: res.Header.Get("X-Request-Id"), body: string(b)}
}

// TestPathRoutesMatchRouter sends a table of requests through the public
// handler (the app and home routes matched before the router) and through
// the same handler with the router alone, and wants the same answer from
// both: status, redirect, content type, Allow and body (request ids
// aside), for app and home paths, escaped and odd names, trailing
// slashes, methods the router refuses, host routes and the routes the
// router keeps.
func TestPathRoutesMatchRouter(t *testing.T) {
	g := fastRouteGateway(t)
	fast := httptest.NewServer(g.routes())
	defer fast.Close()
	slow := httptest.NewServer(g.hygiene(g.path.ByHost(g.path.NoEncodedSlash(g.router()))))
	defer slow.Close()
	ids := regexp.MustCompile(regexp.QuoteMeta(g.reqPre) + `[0-9a-z]+`)

	paths := []string{
		"/apps/bench/x", "/apps/bench/", "/apps/bench", "/apps/bench?q=1", "/apps/bench/x?y=1&z",
		"/apps/bench/x/", "/apps/bench/x/y/z", "/apps/bench/%7Euser", "/apps/bench/a%20b", "/apps/bench/a%2Fb",
		"/apps/be%2Fnch/x", "/node/demo/a%2Fb", "/healthz%2F", "/_wakegate/x%2Fy",
		"/apps/b%65nch/x", "/apps/be%20nch/x", "/apps/be%20nch", "/apps/nope/x", "/apps/nope", "/apps/nope/",
		"/apps/", "/apps", "/apps//x", "/apps/bench//x", "/apps/bench/../x", "/apps/./bench/x", "/APPS/bench/x",
		"/appsbench/x", "/apps/inner/x", "/apps/inner", "/apps/%E2%82%AC/x",
		"/node/demo", "/node/demo/", "/node/demo/x?a=b", "/node/demo/x/", "/node/nope", "/node/nope/x",
		"/node/", "/node", "/node//x", "/node/de%6Do/x", "/node/de%20mo/x", "/node/demo/%2e%2e/x",
		"/", "/favicon.ico", "/healthz", "/readyz", "/nothing", "/_wakegate/wake/node/demo",
		"/_wakegate/wake/app/bench", "/_wakegate/ready",
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "QUERY", "PROPFIND", "FOO"}
	hosts := []string{"gw.example", "bench.apps.test", "inner.apps.test", "nope.apps.test", "demo.nodes.test",
		"nope.nodes.test"}
	type key struct{ method, path, host string }
	var cases []key
	for _, p := range paths {
		for _, m := range methods {
			cases = append(cases, key{m, p, hosts[0]})
		}
		for _, h := range hosts[1:] {
			cases = append(cases, key{"GET", p, h})
		}
	}
	fastServed := 0
	for _, c := range cases {
		want := rawDo(t, slow.Listener.Addr().String(), c.method, c.path, c.host)
		got := rawDo(t, fast.Listener.Addr().String(), c.method, c.path, c.host)
		want.body, got.body = ids.ReplaceAllString(want.body, "ID"), ids.ReplaceAllString(got.body, "ID")
		if (want.id == "") != (got.id == "") {
			t.Errorf("%s %s (Host %s): request id headers %q and %q", c.method, c.path, c.host, got.id, want.id)
		}
		want.id, got.id = "", ""
		if got != want {
			t.Errorf("%s %s (Host %s):\n got %+v\nwant %+v", c.method, c.path, c.host, got, want)
		}
		if strings.HasPrefix(want.body, c.method+" ") {
			fastServed++ // the upstream answered
		}
	}
	// The table reaches the upstreams, not only refusals.
	if fastServed < 50 {
		t.Errorf("%d answers came from an upstream; want the app and home routes forwarded", fastServed)
	}
}

// TestServePathRoute checks which requests the path routes serve
// themselves and which they leave to the router.
func TestServePathRoute(t *testing.T) {
	g := fastRouteGateway(t)
	for _, c := range []struct {
		method, path, raw string
		served            bool
	}{
		{"GET", "/apps/bench/x", "", true},
		{"GET", "/apps/bench", "", true},
		{"POST", "/node/demo", "", true},
		{"QUERY", "/node/demo/x", "", true},
		{"PROPFIND", "/apps/bench/x", "", false},
		{"GET", "/apps/", "", false},
		{"GET", "/apps//x", "", false},
		{"GET", "/node/", "", false},
		{"GET", "/nodes/demo", "", false},
		{"GET", "/healthz", "", false},
		// The escaped path is the one routed on, as the router does.
		{"GET", "/apps/a/b/x", "/apps/a%2Fb/x", true},
		{"GET", "/apps//x", "/apps/%2F/x", true},
	} {
		r := httptest.NewRequest(c.method, "http://gw.example/", nil)
		r.URL.Path, r.URL.RawPath = c.path, c.raw
		w := httptest.NewRecorder()
		if got := g.path.ServePathRoute(w, r); got != c.served {
			t.Errorf("%s %s (raw %q): served %v, want %v", c.method, c.path, c.raw, got, c.served)
		}
	}
}
