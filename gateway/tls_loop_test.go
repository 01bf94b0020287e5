package gateway_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTLSHTTP1OnTheLoop: with TLS on, HTTP/1.1 requests are served by the
// gateway's own loop (server.http1_server: wakegate) with everything an
// HTTPS answer carries: HSTS, X-Forwarded-Proto https, 421 for a host the
// connection was not opened for. What the loop does not take reaches Go's
// server with the connection's TLS state: a chunked POST, a head with
// both framings (refused above TLS), HTTP/2. With net/http chosen, the
// same answers and the loop serves nothing.
func TestTLSHTTP1OnTheLoop(t *testing.T) {
	t.Parallel()
	for _, choice := range []string{"wakegate", "net/http"} {
		t.Run(strings.ReplaceAll(choice, "/", "-"), func(t *testing.T) {
			t.Parallel()
			pub, plain := tlsListeners(t)
			gw := tlsStartServer(t, "  http1_server: "+choice+"\n", "", fmt.Sprintf(`admin:
  listen: "127.0.0.1:0"
  tokens: [%q]
tls:
  mode: internal
  names: [dev.test]
  hsts: {max_age: 1h}
`, admToken), pub, plain)
			roots := internalRoots(t, gw)
			waitCert(t, gw.addr, "dev.test", roots)
			adm := admServe(t, gw.e2eGateway)
			base := adm.scrape(t)

			h1 := tlsClient(t, gw.addr, roots, false)
			for range 2 {
				res, body := e2eGet(t, h1, "https://dev.test/apps/demo/whoami", nil)
				if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 || res.TLS == nil ||
					res.Header.Get("Strict-Transport-Security") != "max-age=3600" ||
					!strings.Contains(string(body), `"X-Forwarded-Proto":["https"]`) {
					t.Fatalf("GET over HTTP/1.1: %d %s, HSTS %q\n%s", res.StatusCode, res.Proto,
						res.Header.Get("Strict-Transport-Security"), body)
				}
			}
			req, _ := http.NewRequest(http.MethodGet, "https://dev.test/apps/demo/whoami", nil)
			req.Host = "other.test"
			res, err := h1.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(string(b), "misdirected") {
				t.Errorf("Host other.test on a dev.test connection: %d %s, want 421", res.StatusCode, b)
			}

			res, err = h1.Post("https://dev.test/apps/demo/whoami", "text/plain",
				io.MultiReader(strings.NewReader("chunked "), strings.NewReader("body")))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"body_bytes":12`) ||
				res.Header.Get("Strict-Transport-Security") == "" {
				t.Errorf("chunked POST: %d %s", res.StatusCode, b)
			}

			c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "dev.test", RootCAs: roots})
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(c, "POST /apps/demo/whoami HTTP/1.1\r\nHost: dev.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
			res, err = http.ReadResponse(bufio.NewReader(c), nil)
			_ = c.Close()
			if err != nil || res.StatusCode != http.StatusBadRequest {
				t.Errorf("a head with both framings over TLS: %v %v, want 400", res, err)
			}

			res, body := e2eGet(t, tlsClient(t, gw.addr, roots, true), "https://dev.test/apps/demo/whoami", nil)
			if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
				t.Errorf("GET over HTTP/2: %d %s\n%s", res.StatusCode, res.Proto, body)
			}

			checkLoopCounts(t, choice, base, adm.scrape(t), 3, 3)
		})
	}
}
