package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAccessWarm compares the warm path of a 1 KiB GET through the
// gateway's handler to an app with the public policy, with a jwt policy
// over an HS256 shared secret, and with a jwt policy over an ES256 key from
// a JWKS (cached after the first request): the difference is the cost of
// the access check per request.
func BenchmarkAccessWarm(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer backend.Close()
	js := newJWKSServer(b)
	gw := e2eStartInProcess(b, fmt.Sprintf(`
access:
  default: public
  policies:
    - {name: hs, type: jwt, jwt: {secret: %q}}
    - {name: es, type: jwt, jwt: {jwks_url: %q}}
  apps:
    - {slug: hs, policy: hs}
    - {slug: es, policy: es}
apps:
  - {slug: pub, upstream: %q, kind: api}
  - {slug: hs, upstream: %q, kind: api}
  - {slug: es, upstream: %q, kind: api}
`, acSecret, js.URL, backend.URL, backend.URL, backend.URL))
	front := httptest.NewServer(gw.g.Handler())
	defer front.Close()
	for _, c := range []struct{ name, path, token string }{
		{"public", "/apps/pub/x", ""},
		{"jwt-HS256", "/apps/hs/x", acToken(b, "alice", time.Hour)},
		{"jwt-ES256", "/apps/es/x", js.token(b, "alice")},
	} {
		b.Run(c.name, func(b *testing.B) { acBenchGet(b, front.URL+c.path, c.token, len(body)) })
	}
}

// acBenchGet fetches url b.N times over one keep-alive client with the
// bearer token (none if empty) and checks every answer.
func acBenchGet(b *testing.B, url, token string, want int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || n != int64(want) {
			b.Fatalf("GET %s: %d, %d bytes, %v", url, res.StatusCode, n, err)
		}
	}
}
