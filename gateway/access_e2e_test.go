package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/internal/testbin"
)

// acSecret is the HS256 secret of the tests' jwt policy.
const acSecret = "access-test-secret-0123456789abcdef"

// acStart serves the exec home h1 at /node/alice (wkConfig) with the YAML
// extra appended at the top level.
func acStart(t *testing.T, extra string) *wkGateway {
	t.Helper()
	return acStartWith(t, wkOptions{}, extra)
}

// acStartWith is acStart with the home shaped by o.
func acStartWith(t *testing.T, o wkOptions, extra string) *wkGateway {
	t.Helper()
	o.extra = extra
	return wkStart(t, o)
}

// acToken signs claims with HS256 and acSecret.
func acToken(t testing.TB, sub string, exp time.Duration) string {
	t.Helper()
	now := time.Now()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "iss": "test-issuer", "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(exp).Unix(),
	}).SignedString([]byte(acSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const acJWTPolicy = `
access:
  default: users
  policies:
    - name: users
      type: jwt
      jwt:
        secret: "` + acSecret + `"
        issuer: test-issuer
        leeway: 1s
        cookie: wg_token
`

// acStarted counts the exec provider's started-home log lines.
func acStarted(gw *wkGateway) int { return len(gw.logs.Lines(`"exec: started home"`)) }

// A jwt home refuses a valid token for another owner, a missing token and
// an expired one, and never starts; a token for its target wakes it, from
// the header, the cookie or ?token= (removed before forwarding).
func TestAccessJWTHome(t *testing.T) {
	gw := acStart(t, acJWTPolicy)
	cases := []struct {
		name   string
		path   string
		hdr    map[string]string
		status int
		code   string
	}{
		{"no token", wkWhoami, nil, 401, "token_missing"},
		{"another owner", wkWhoami, map[string]string{"Authorization": "Bearer " + acToken(t, "bob", time.Hour)}, 403, "token_not_for_home"},
		{"expired", wkWhoami, map[string]string{"Authorization": "Bearer " + acToken(t, wkTarget, -time.Hour)}, 401, "token_expired"},
		{"bad signature", wkWhoami, map[string]string{"Authorization": "Bearer " + acToken(t, wkTarget, time.Hour) + "x"}, 401, "token_bad_signature"},
		{"garbage", wkWhoami, map[string]string{"Authorization": "Bearer abc.def"}, 401, "token_malformed"},
		{"waiting page poll", "/_wakegate/wake/node/" + wkTarget, nil, 401, "token_missing"},
	}
	for _, c := range cases {
		hdr := map[string]string{"Accept": "application/json"}
		for k, v := range c.hdr {
			hdr[k] = v
		}
		res, body := gw.do("GET", c.path, hdr)
		if res.StatusCode != c.status {
			t.Errorf("%s: status %d; want %d (%s)", c.name, res.StatusCode, c.status, body)
			continue
		}
		var e e2eErrorBody
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != c.code || e.Error.RequestID == "" || e.Error.Message == "" {
			t.Errorf("%s: body %s; want code %s, a sentence and a request id", c.name, body, c.code)
		}
		if strings.Contains(body, acSecret) || strings.Contains(body, "bob") {
			t.Errorf("%s: body names an internal detail: %s", c.name, body)
		}
	}
	if n := acStarted(gw); n != 0 {
		t.Fatalf("%d homes started for refused requests; want 0", n)
	}
	if pids := testbin.HomePIDs(t, gw.homeDir()); len(pids) != 0 {
		t.Fatalf("home processes %v after refused requests; want none", pids)
	}
	if n := len(gw.logs.Lines(`"access denied"`)); n != len(cases) {
		t.Errorf("%d access denied log lines; want %d", n, len(cases))
	}

	tok := acToken(t, wkTarget, time.Hour)
	for _, c := range []struct {
		name string
		path string
		hdr  map[string]string
	}{
		{"header", wkWhoami, map[string]string{"Authorization": "Bearer " + tok}},
		{"cookie", wkWhoami, map[string]string{"Cookie": "wg_token=" + tok}},
		{"query", wkWhoami + "?a=1&token=" + tok, nil},
	} {
		res, body := gw.do("GET", c.path, c.hdr)
		if res.StatusCode != 200 {
			t.Fatalf("%s: status %d (%s)", c.name, res.StatusCode, body)
		}
		var who e2eWhoami
		if err := json.Unmarshal([]byte(body), &who); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(who.RawQuery, "token") || strings.Contains(body, tok) && c.name == "query" {
			t.Errorf("%s: the home saw the token in the query %q", c.name, who.RawQuery)
		}
		if c.name == "query" && who.RawQuery != "a=1" {
			t.Errorf("query: the home saw %q; want a=1", who.RawQuery)
		}
	}
	if n := acStarted(gw); n != 1 {
		t.Errorf("%d homes started; want 1", n)
	}
}

// A client over limits.client_rate gets 429 with Retry-After, and no home
// starts for it.
func TestAccessClientRateLimit(t *testing.T) {
	gw := acStart(t, "limits:\n  client_rate: 0.001\n  client_burst: 2\n")
	var codes []int
	for range 4 {
		res, body := gw.do("GET", "/node/nobody/x", map[string]string{"Accept": "application/json"})
		codes = append(codes, res.StatusCode)
		if res.StatusCode == 429 {
			if res.Header.Get("Retry-After") == "" || !strings.Contains(body, `"rate_limited"`) {
				t.Errorf("429 without Retry-After or code: %v %s", res.Header, body)
			}
		}
	}
	if codes[0] != 404 || codes[1] != 404 || codes[2] != 429 || codes[3] != 429 {
		t.Fatalf("statuses %v; want 404 404 429 429", codes)
	}
	res, _ := gw.do("GET", wkWhoami, nil)
	if res.StatusCode != 429 {
		t.Fatalf("a limited client's request for a sleeping home: %d; want 429", res.StatusCode)
	}
	if n := acStarted(gw); n != 0 {
		t.Fatalf("%d homes started for limited requests; want 0", n)
	}
	if pids := testbin.HomePIDs(t, gw.homeDir()); len(pids) != 0 {
		t.Fatalf("home processes %v; want none", pids)
	}
}

// jwksServer serves a JSON Web Key Set of one ES256 key, swappable.
type jwksServer struct {
	*httptest.Server
	mu  sync.Mutex
	kid string
	key *ecdsa.PrivateKey
	// delay is added before each answer: a JWKS across a real network.
	delay time.Duration
}

func newJWKSServer(t testing.TB) *jwksServer {
	s := &jwksServer{}
	s.rotate(t, "k1")
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		time.Sleep(s.delay)
		pub, err := s.key.PublicKey.Bytes() // 0x04, X, Y
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		b := base64.RawURLEncoding.EncodeToString
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": s.kid, "x": b(pub[1:33]), "y": b(pub[33:])}}})
	}))
	t.Cleanup(s.Close)
	return s
}

// rotate replaces the served key with a new one named kid.
func (s *jwksServer) rotate(t testing.TB, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kid, s.key = kid, k
}

func (s *jwksServer) token(t testing.TB, sub string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = s.kid
	out, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A JWKS rotation is picked up without a restart: a token signed by the
// new key passes at once, one signed by the retired key no longer does.
// The key set answers after 50 ms, as one across a network does: the
// fetch for the unknown key gets the whole jwks_timeout.
func TestAccessJWKSRotation(t *testing.T) {
	js := newJWKSServer(t)
	js.delay = 50 * time.Millisecond
	gw := acStart(t, `
access:
  default: users
  policies:
    - name: users
      type: jwt
      jwt:
        jwks_url: "`+js.URL+`"
        jwks_refresh: 1h
`)
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	old := js.token(t, wkTarget)
	if res, body := gw.do("GET", wkWhoami, bearer(old)); res.StatusCode != 200 {
		t.Fatalf("first key: %d %s", res.StatusCode, body)
	}
	js.rotate(t, "k2")
	if res, body := gw.do("GET", wkWhoami, bearer(js.token(t, wkTarget))); res.StatusCode != 200 {
		t.Fatalf("rotated key: %d %s", res.StatusCode, body)
	}
	if res, body := gw.do("GET", wkWhoami, bearer(old)); res.StatusCode != 401 {
		t.Fatalf("retired key: %d %s; want 401", res.StatusCode, body)
	}
}

// A home asked to wake past limits.wake_rate gets 429 with Retry-After and
// is not started again.
func TestAccessWakeRateLimit(t *testing.T) {
	gw := acStart(t, "limits:\n  wake_rate: 0.001\n  wake_burst: 1\n")
	gw.mustOK(wkWhoami, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := gw.g.Engine().Suspend(ctx, wkHome); err != nil {
		t.Fatalf("suspend: %v", err)
	}
	res, body := gw.do("GET", wkWhoami, map[string]string{"Accept": "application/json"})
	if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" || !strings.Contains(body, `"wake_rate_limited"`) {
		t.Fatalf("second wake: %d %v %s; want 429 wake_rate_limited with Retry-After", res.StatusCode, res.Header, body)
	}
	if n := acStarted(gw); n != 1 {
		t.Fatalf("%d home starts; want 1", n)
	}
}

// Past limits.max_waiting_per_home, a caller for a waking home gets 503 at
// once while the callers already waiting are served.
func TestAccessWaitingCap(t *testing.T) {
	gw := acStartWith(t, wkOptions{boot: "1500ms"}, "limits:\n  max_waiting_per_home: 1\n")
	first := make(chan int, 1)
	go func() {
		res, _, err := wkSend(gw.client, "GET", gw.url+wkWhoami, nil)
		if err != nil {
			first <- 0
			return
		}
		first <- res.StatusCode
	}()
	testbin.Eventually(t, "the wake to start", func() bool { return acStarted(gw) == 1 })
	res, body := gw.do("GET", wkWhoami, map[string]string{"Accept": "application/json"})
	if res.StatusCode != 503 || !strings.Contains(body, `"too_many_waiting"`) || res.Header.Get("Retry-After") == "" {
		t.Errorf("second caller: %d %s; want 503 too_many_waiting with Retry-After", res.StatusCode, body)
	}
	if st := <-first; st != 200 {
		t.Errorf("first caller: %d; want 200", st)
	}
}

// The credential that carried a jwt token is the gateway's: the home gets
// the request without it (the caller's other cookies kept), unless the
// policy sets forward_token for homes that check the token themselves.
// Refusals are counted in wakegate_access_denied_total by policy and code.
func TestAccessJWTCredentialsStripped(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "stripped", true: "forward_token"}[keep], func(t *testing.T) {
			policy := acJWTPolicy
			if keep {
				policy += "        forward_token: true\n"
			}
			a := admStart(t, admDemo+policy, "")
			c := e2eClient(t)
			tok := acToken(t, "demo", time.Hour)
			url := "http://" + a.addr + "/node/demo/whoami"

			_, who, _ := e2eGetWhoami(t, c, url, http.Header{"Authorization": {"Bearer " + tok}})
			if got := who.Headers.Get("Authorization"); (got != "") != keep {
				t.Errorf("Authorization at the home = %q; want it kept only with forward_token", got)
			}
			_, who, _ = e2eGetWhoami(t, c, url, http.Header{"Cookie": {"theme=dark; wg_token=" + tok + "; lang=fr"}})
			want := "theme=dark; lang=fr"
			if keep {
				want = "theme=dark; wg_token=" + tok + "; lang=fr"
			}
			if got := strings.Join(who.Headers.Values("Cookie"), "; "); got != want {
				t.Errorf("Cookie at the home = %q; want %q", got, want)
			}

			before := admValue(a.scrape(t), "wakegate_access_denied_total", map[string]string{"policy": "users", "code": "token_missing"})
			for range 2 {
				if res, body := e2eGet(t, c, url, nil); res.StatusCode != http.StatusUnauthorized {
					t.Fatalf("no token: %d %s", res.StatusCode, body)
				}
			}
			if res, body := e2eGet(t, c, url, http.Header{"Authorization": {"Bearer " + acToken(t, "bob", time.Hour)}}); res.StatusCode != http.StatusForbidden {
				t.Fatalf("another owner: %d %s", res.StatusCode, body)
			}
			fams := a.scrape(t)
			if got := admValue(fams, "wakegate_access_denied_total", map[string]string{"policy": "users", "code": "token_missing"}) - before; got != 2 {
				t.Errorf("denied{users,token_missing} moved by %v; want 2", got)
			}
			if got := admValue(fams, "wakegate_access_denied_total", map[string]string{"policy": "users", "code": "token_not_for_home"}); got != 1 {
				t.Errorf("denied{users,token_not_for_home} = %v; want 1", got)
			}
		})
	}
}
