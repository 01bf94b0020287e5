package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// cookieEcho is an upstream that answers every request with the Cookie
// header it received, and every WebSocket with one text frame holding it.
func cookieEcho(t *testing.T) *httptest.Server {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.Join(r.Header.Values("Cookie"), "; ")
		if websocket.IsWebSocketUpgrade(r) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.WriteMessage(websocket.TextMessage, []byte(got))
			_, _, _ = c.ReadMessage() // until the client closes
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, got)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The gateway's cookies (every jwt policy's cookie) are removed from every
// forwarded request, whatever policy decided the route: a public home or
// app on the same origin as a jwt home never receives the visitor's token
// cookie, on the direct path, the ReverseProxy path and WebSocket
// upgrades. Only a route whose own jwt policy sets forward_token keeps it.
func TestGatewayCookiesStrippedOnEveryRoute(t *testing.T) {
	echo := cookieEcho(t)
	cfg := admDemo + fmt.Sprintf(`  - slug: echo
    upstream: %s
    strip_prefix: true
`, echo.URL) + acJWTPolicy + `        forward_token: true
    - name: staff
      type: jwt
      jwt:
        secret: "` + acSecret + `"
        cookie: staff_session
  homes:
    - target: demo
      policy: public
  apps:
    - slug: echo
      policy: public
    - slug: demo
      policy: public
`
	a := admStart(t, cfg, "")
	c := e2eClient(t)
	sent := "theme=dark; wg_token=tok-for-another-home; lang=fr; staff_session=s3; x=\"q\""
	want := "theme=dark; lang=fr; x=\"q\""
	hdr := http.Header{"Cookie": {sent}}

	for _, path := range []string{
		"/node/demo/whoami",     // direct path
		"/node/demo/whoami?a;b", // a ';' in the query: ReverseProxy path
		"/apps/demo/whoami",     // an app in a home
	} {
		_, who, _ := e2eGetWhoami(t, c, "http://"+a.addr+path, hdr)
		if got := strings.Join(who.Headers.Values("Cookie"), "; "); got != want {
			t.Errorf("%s: the home got Cookie %q; want %q", path, got, want)
		}
	}
	for _, path := range []string{"/apps/echo/x", "/apps/echo/x?a;b"} {
		res, body := e2eGet(t, c, "http://"+a.addr+path, hdr)
		if res.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("%s: the upstream got Cookie %q (status %d); want %q", path, body, res.StatusCode, want)
		}
	}

	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, res, err := d.Dial("ws://"+a.addr+"/apps/echo/ws", hdr)
	if err != nil {
		t.Fatalf("WebSocket: %v (%v)", err, res)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("WebSocket read: %v", err)
	}
	if string(msg) != want {
		t.Errorf("WebSocket: the upstream got Cookie %q; want %q", msg, want)
	}

	// A route decided by a jwt policy with forward_token keeps that
	// policy's cookie (its home checks the token itself), not the others'.
	a2 := admStart(t, admDemo+acJWTPolicy+"        forward_token: true\n", "")
	tok := acToken(t, "demo", time.Hour)
	_, who, _ := e2eGetWhoami(t, c, "http://"+a2.addr+"/node/demo/whoami",
		http.Header{"Cookie": {"theme=dark; wg_token=" + tok}})
	if got := strings.Join(who.Headers.Values("Cookie"), "; "); got != "theme=dark; wg_token="+tok {
		t.Errorf("forward_token: the home got Cookie %q; want the token kept", got)
	}
}
