package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const hdrSecret = "headers-test-secret-0123456789abcdef"

// hdrToken signs a token for sub with HS256 and hdrSecret, expiring in exp.
func hdrToken(t *testing.T, sub string, exp time.Duration) string {
	t.Helper()
	now := time.Now()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "iat": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(exp).Unix(),
	}).SignedString([]byte(hdrSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A header a policy sets (forward_auth's response_headers: X-User) never
// comes from a client, in any spelling, on any route: the route the
// policy decides gets the auth service's value only, and a public route
// next to it gets none at all.
func TestNoForgedIdentityOnAnyRoute(t *testing.T) {
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-User", "alice")
	}))
	defer auth.Close()
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, `access:
  default: sso
  policies:
    - name: sso
      type: forward_auth
      forward_auth:
        url: "`+auth.URL+`"
        response_headers: [x-user]
  apps:
    - {slug: a, policy: public}
`, home, app))
	forged := "X-USER: admin\r\nX_User: admin\r\nx_user: admin\r\nX_USER: admin\r\n"
	for _, c := range []struct {
		path string
		up   *hardUpstream
		want []string
	}{{"/node/h/x", home, []string{"alice"}}, {"/apps/a/x", app, nil}} {
		res, body := hardExchange(t, addr, "GET "+c.path+" HTTP/1.1\r\nHost: gw\r\n"+forged+"\r\n")
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.path, res.StatusCode, body)
		}
		got := c.up.last(t).Header
		for k, vs := range got {
			for _, v := range vs {
				if strings.Contains(v, "admin") {
					t.Errorf("%s: forged %s: %s reached the upstream", c.path, k, v)
				}
			}
		}
		if v := got.Values("X-User"); strings.Join(v, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: X-User %q; want %q", c.path, v, c.want)
		}
	}
}

// A jwt policy's credentials (its bearer token, its query parameter, and
// the token in a Referer) reach no route that the policy does not decide;
// an app's own bearer token and ?token= (not the gateway's) pass.
func TestCredentialsKeptToTheirRoute(t *testing.T) {
	home := newHardUpstream(t, nil)
	app := newHardUpstream(t, nil)
	addr := hardGateway(t, homeConfig(t, `access:
  default: public
  policies:
    - name: users
      type: jwt
      jwt:
        secret: "`+hdrSecret+`"
  homes:
    - {target: h, policy: users}
`, home, app))
	tok := hdrToken(t, "h", time.Hour)
	old := hdrToken(t, "h", -time.Hour) // expired: still a credential
	referer := "http://gw/node/h/?token=" + tok + "&tab=1"

	// The home its policy decides: admitted, and the credential kept to the gateway.
	res, body := hardExchange(t, addr, "GET /node/h/x?token="+tok+"&q=1 HTTP/1.1\r\nHost: gw\r\nReferer: "+referer+"\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("home: %d %s", res.StatusCode, body)
	}
	if got := home.last(t); got.URI != "/node/h/x?q=1" || strings.Contains(got.Header.Get("Referer"), tok) {
		t.Errorf("home: %s, Referer %q; want neither carrying the token", got.URI, got.Header.Get("Referer"))
	}

	// A public app on the same origin gets none of them.
	for _, cred := range []string{tok, old} {
		res, body = hardExchange(t, addr, "GET /apps/a/x?token="+cred+"&q=1 HTTP/1.1\r\nHost: gw\r\n"+
			"Authorization: Bearer "+cred+"\r\nReferer: "+referer+"\r\n\r\n")
		if res.StatusCode != 200 {
			t.Fatalf("app: %d %s", res.StatusCode, body)
		}
		got := app.last(t)
		if strings.Contains(got.URI, cred) || got.Header.Get("Authorization") != "" || strings.Contains(got.Header.Get("Referer"), tok) {
			t.Errorf("the public app received the policy's credential: %s, Authorization %q, Referer %q",
				got.URI, got.Header.Get("Authorization"), got.Header.Get("Referer"))
		}
		if u, err := url.Parse(got.Header.Get("Referer")); err != nil || u.Query().Get("tab") != "1" || u.Path != "/node/h/" {
			t.Errorf("the Referer lost more than the token: %q", got.Header.Get("Referer"))
		}
	}

	// The app's own credentials are its own.
	res, body = hardExchange(t, addr, "GET /apps/a/x?token=app-own HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer app-own\r\n\r\n")
	if res.StatusCode != 200 {
		t.Fatalf("app: %d %s", res.StatusCode, body)
	}
	if got := app.last(t); got.URI != "/apps/a/x?token=app-own" || got.Header.Get("Authorization") != "Bearer app-own" {
		t.Errorf("the app's own credentials: %s, Authorization %q", got.URI, got.Header.Get("Authorization"))
	}
}
