package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// isoConfig serves two demo homes: alice, public, and bob, whose jwt
// policy takes its token from the wg_token cookie; extra is appended.
const isoConfig = `
wake:
  idle_timeout: 0s
homes:
  - id: alice
  - id: bob
` + acJWTPolicy + `  homes:
    - target: alice
      policy: public
`

// isoBrowser is headless Chromium that resolves every name under .test to
// 127.0.0.1, with no DNS.
func isoBrowser(t *testing.T) context.Context {
	t.Helper()
	return admBrowser(t, chromedp.Flag("host-resolver-rules", "MAP *.test 127.0.0.1"))
}

// isoWake wakes both homes before the browser comes: a page shown while
// a home wakes is the waiting page, which navigates by itself once the
// home is ready, under a script the test is running.
func isoWake(t *testing.T, gw *e2eGateway) {
	t.Helper()
	for _, id := range []string{"alice", "bob"} {
		if _, err := gw.g.Engine().WakeNow(context.Background(), id, "test"); err != nil {
			t.Fatalf("wake %s: %v", id, err)
		}
	}
}

// isoFetch runs fetch(url, {credentials: "include"}) in the page ctx
// shows, as a page of that origin would, and returns the body it could
// read, or "blocked: ..." when the browser refused it the answer.
func isoFetch(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	js := `fetch(` + jsString(url) + `, {credentials: "include", cache: "no-store"})
	  .then(function (r) { return r.text(); }, function (e) { return "blocked: " + e; })`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("fetch %s from the page: %v", url, err)
	}
	return out
}

// isoCookieAtHome is the Cookie header a home's /whoami saw, from a
// fetch by the page ctx shows.
func isoCookieAtHome(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	body := isoFetch(t, ctx, url)
	var who e2eWhoami
	if err := json.Unmarshal([]byte(body), &who); err != nil || who.Path == "" {
		t.Fatalf("%s answered %q", url, body)
	}
	return strings.Join(who.Headers.Values("Cookie"), "; ")
}

// isoSetCookie gives the browser the HttpOnly cookie name=value for url's
// host (no Domain: that host only), as a sign-in there would.
func isoSetCookie(t *testing.T, ctx context.Context, url, name, value string) {
	t.Helper()
	httpOnly := true
	if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: name, Value: value, URL: url,
		Path: "/", HTTPOnly: &httpOnly}); err != nil {
		t.Fatalf("set cookie %s for %s: %v", name, url, err)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Under host routing each home is an origin of its own: a public page in
// alice's home cannot read bob's home (the fetch fails CORS), and neither
// the page nor alice's home ever gets bob's cookie, which the browser
// delivers to bob's host only.
func TestIsolationHostRoutingBrowser(t *testing.T) {
	gw := e2eStartInProcess(t, isoConfig+"hosts:\n  nodes_domain: nodes.test\n")
	isoWake(t, gw)
	_, port, _ := net.SplitHostPort(gw.addr)
	alice, bob := "http://alice.nodes.test:"+port, "http://bob.nodes.test:"+port
	ctx := isoBrowser(t)
	tok := acToken(t, "bob", time.Hour)

	// The visitor is signed in at bob's home: an HttpOnly cookie for its
	// host, which the browser sends to bob (bob's policy admits it).
	isoSetCookie(t, ctx, bob+"/", "wg_token", tok)
	if err := chromedp.Do(ctx, chromedp.Navigate(bob+"/whoami")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent`)); err != nil || !strings.Contains(got, `"path"`) {
		t.Fatalf("bob's home did not admit the visitor's cookie: %q (%v)", got, err)
	}

	// A public page in alice's home.
	if err := chromedp.Do(ctx, chromedp.Navigate(alice+"/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if got := isoFetch(t, ctx, bob+"/whoami"); !strings.HasPrefix(got, "blocked: ") {
		t.Errorf("alice's page read bob's home: %.200s", got)
	}
	if got := isoCookieAtHome(t, ctx, alice+"/whoami"); strings.Contains(got, "wg_token") {
		t.Errorf("alice's home received Cookie %q; want no wg_token", got)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(got, "wg_token") {
		t.Errorf("alice's page sees document.cookie %q (%v)", got, err)
	}
}

// Under path routing every home shares the gateway's origin, with the
// limits docs/security.md states: the jwt cookie, set for the
// whole origin, is never delivered to alice's home nor readable by her
// page (HttpOnly); but alice's page may read bob's pages, because the
// browser sees one origin.
func TestIsolationPathRoutingBrowser(t *testing.T) {
	gw := e2eStartInProcess(t, isoConfig)
	isoWake(t, gw)
	origin := "http://" + gw.addr
	ctx := isoBrowser(t)
	tok := acToken(t, "bob", time.Hour)

	isoSetCookie(t, ctx, origin+"/", "wg_token", tok)
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/node/alice/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if got := isoCookieAtHome(t, ctx, origin+"/node/alice/whoami"); strings.Contains(got, "wg_token") {
		t.Errorf("alice's home received Cookie %q; want no wg_token", got)
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(got, "wg_token") {
		t.Errorf("alice's page sees document.cookie %q (%v)", got, err)
	}
	// The shared origin, as documented: the read goes through, with the
	// visitor's cookie admitting it, and bob's home itself gets no cookie.
	if got := isoCookieAtHome(t, ctx, origin+"/node/bob/whoami"); strings.Contains(got, "wg_token") {
		t.Errorf("bob's home received Cookie %q; want the gateway's cookie removed", got)
	}
}
