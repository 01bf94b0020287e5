package gateway_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/pebbletest"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// tlsGateway is a gateway with TLS on, serving in the test process on
// its own loopback HTTPS and HTTP listeners.
type tlsGateway struct {
	*e2eGateway
	httpAddr string
}

// tlsListeners opens the HTTPS and plain-HTTP listeners first, so that
// Pebble can be told their ports.
func tlsListeners(t testing.TB) (pub, plain net.Listener) {
	t.Helper()
	var err error
	if pub, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return pub, plain
}

func portNum(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// tlsStart serves a gateway from the YAML extra (which sets the tls
// section) on pub and plain, with the demo home "demo" and its app "demo".
func tlsStart(t testing.TB, extra string, pub, plain net.Listener) *tlsGateway {
	t.Helper()
	return tlsStartHomes(t, "", extra, pub, plain)
}

// tlsStartHomes is tlsStart with more homes (YAML list entries).
func tlsStartHomes(t testing.TB, homes, extra string, pub, plain net.Listener) *tlsGateway {
	t.Helper()
	return tlsStartServer(t, "", homes, extra, pub, plain)
}

// tlsStartServer is tlsStartHomes with more server settings (YAML lines,
// indented).
func tlsStartServer(t testing.TB, server, homes, extra string, pub, plain net.Listener) *tlsGateway {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	command := fmt.Sprintf("[%q, \"demo-home\", \"--addr\", \"127.0.0.1:{port}\", \"--target\", \"{target}\", \"--version\", \"{version}\"]",
		testbin.Build(t))
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
exec:
  command: %s
server:
  drain_grace: 1s
%swake:
  idle_timeout: 0s
homes:
  - id: demo
%sapps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
%s`, data, command, server, homes, extra)
	cfg, err := all.Load("tls.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	g.UseHTTPListener(plain)
	p := e2eServe(t, g, pub, data, logs)
	return &tlsGateway{e2eGateway: p, httpAddr: plain.Addr().String()}
}

// tlsClient trusts roots only, and dials addr whatever the URL's host
// (test names do not resolve). h2 turns HTTP/2 on.
func tlsClient(t testing.TB, addr string, roots *x509.CertPool, h2 bool) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: testbin.WaitLimit,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// waitCert waits until a handshake for name verifies against roots.
func waitCert(t testing.TB, addr, name string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	testbin.Eventually(t, "a certificate for "+name, func() bool {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
		if err != nil {
			return false
		}
		defer func() { _ = c.Close() }()
		leaf = c.ConnectionState().PeerCertificates[0]
		return true
	})
	return leaf
}

// TestTLSACME obtains a certificate for a test name from a real ACME server
// (Pebble, validating each challenge type on the gateway's own listeners)
// and serves the demo app and home over it: HTTPS with the chain verified
// against Pebble's root, HTTP/2, a WebSocket, the framing refusal above
// TLS, HSTS, and the plain-HTTP listener's redirect that a forged Host
// cannot turn into an open redirect.
func TestTLSACME(t *testing.T) {
	t.Parallel()
	for _, challenge := range []string{"http-01", "tls-alpn-01"} {
		t.Run(challenge, func(t *testing.T) {
			pub, plain := tlsListeners(t)
			pb := pebbletest.Start(t, pebbletest.Options{HTTPPort: portNum(plain), TLSPort: portNum(pub)})
			gw := tlsStart(t, fmt.Sprintf(`admin:
  listen: "127.0.0.1:0"
  tokens: [%q]
tls:
  mode: acme
  names: [demo.test]
  ca: %q
  email: ops@demo.test
  trusted_roots: [%q]
  challenges: [%s]
  hsts: {max_age: 1h, include_subdomains: true}
`, admToken, pb.Directory, pb.ListenerRootPEM, challenge), pub, plain)
			leaf := waitCert(t, gw.addr, "demo.test", pb.Roots)
			if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "demo.test" {
				t.Fatalf("certificate names %v, want [demo.test]", leaf.DNSNames)
			}
			if n := pb.Orders(); n != 1 {
				t.Errorf("pebble saw %d orders, want 1", n)
			}
			tlsOperations(t, gw, leaf)
			if challenge == "tls-alpn-01" {
				tlsServes(t, gw, pb.Roots)
			}
		})
	}
}

// tlsServes checks what the HTTPS and plain-HTTP listeners serve for
// demo.test, whose certificate roots verify.
func tlsServes(t *testing.T, gw *tlsGateway, roots *x509.CertPool) {
	t.Run("HTTPS", func(t *testing.T) {
		c := tlsClient(t, gw.addr, roots, false)
		res, body := e2eGet(t, c, "https://demo.test/apps/demo/whoami", nil)
		if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 || res.TLS == nil || len(res.TLS.VerifiedChains) == 0 {
			t.Fatalf("GET /apps/demo/whoami: %d %s over %s; want 200 over HTTP/1.1 with a verified chain", res.StatusCode, body, res.Proto)
		}
		if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=3600; includeSubDomains" {
			t.Errorf("Strict-Transport-Security %q", got)
		}
		if !strings.Contains(string(body), `"X-Forwarded-Proto":["https"]`) {
			t.Errorf("the home did not see X-Forwarded-Proto https: %s", body)
		}
	})
	t.Run("HTTP2", func(t *testing.T) {
		c := tlsClient(t, gw.addr, roots, true)
		for range 3 {
			res, body := e2eGet(t, c, "https://demo.test/apps/demo/whoami", nil)
			if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
				t.Fatalf("GET over h2: %d %s (%s)", res.StatusCode, body, res.Proto)
			}
		}
		// A request for another host on this connection is misdirected.
		req, _ := http.NewRequest(http.MethodGet, "https://demo.test/apps/demo/", nil)
		req.Host = "other.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host other.test on a demo.test connection: %d, want 421", res.StatusCode)
		}
	})
	t.Run("WebSocket", func(t *testing.T) {
		d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots},
			NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", gw.addr)
			}, HandshakeTimeout: testbin.WaitLimit}
		conn, res, err := d.Dial("wss://demo.test/node/demo/ws", nil)
		if err != nil {
			t.Fatalf("wss dial: %v (%v)", err, res)
		}
		defer conn.Close()
		e2eHello(t, conn, "demo")
		e2eEcho(t, conn, websocket.TextMessage, []byte("over tls"))
	})
	t.Run("Framing", func(t *testing.T) {
		c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "demo.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_, _ = io.WriteString(c, "POST /apps/demo/whoami HTTP/1.1\r\nHost: demo.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(testbin.WaitLimit))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "bad_framing") {
			t.Fatalf("CL+TE over TLS: %d %s, want 400 bad_framing", res.StatusCode, body)
		}
	})
	t.Run("Redirect", func(t *testing.T) {
		c := &http.Client{Timeout: testbin.WaitLimit,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		get := func(host, path string) *http.Response {
			req, _ := http.NewRequest(http.MethodGet, "http://"+gw.httpAddr+path, nil)
			req.Host = host
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			return res
		}
		_, port, _ := net.SplitHostPort(gw.addr)
		res := get("demo.test", "/apps/demo/x?q=1")
		if want := "https://demo.test:" + port + "/apps/demo/x?q=1"; res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != want {
			t.Errorf("demo.test: %d Location %q, want 308 %s", res.StatusCode, res.Header.Get("Location"), want)
		}
		for _, forged := range []string{"evil.example", "evil.example:80", "demo.test@evil.example", "127.0.0.1", "demo.test\\.evil.example"} {
			if res := get(forged, "/apps/demo/"); res.Header.Get("Location") != "" || res.StatusCode != http.StatusNotFound {
				t.Errorf("forged Host %q: %d Location %q, want 404 and no Location", forged, res.StatusCode, res.Header.Get("Location"))
			}
		}
		if res := get("demo.test", "/.well-known/acme-challenge/none"); res.StatusCode != http.StatusNotFound || res.Header.Get("Location") != "" {
			t.Errorf("ACME path with no challenge: %d Location %q, want 404 (never a redirect)", res.StatusCode, res.Header.Get("Location"))
		}
	})
}

// tlsOperations checks what operators see of an obtained certificate: the
// event on the event stream, the admin API's inventory and the days to
// expiry on /metrics.
func tlsOperations(t *testing.T, gw *tlsGateway, leaf *x509.Certificate) {
	t.Helper()
	var seen bool
	for _, e := range gw.g.Engine().Events().Recent() {
		seen = seen || (e.Type == "certificate.obtained" && strings.Contains(e.Message, "demo.test"))
	}
	if !seen {
		t.Error("no certificate.obtained event for demo.test on the event stream")
	}
	adm := admServe(t, gw.e2eGateway)
	code, _, body := adm.do(t, http.MethodGet, "/admin/certificates", admToken, nil, nil)
	var inv struct {
		Mode         string
		Certificates []struct {
			Name, Status string
			LastEvent    string    `json:"last_event"`
			NotAfter     time.Time `json:"not_after"`
		}
	}
	if code != http.StatusOK || json.Unmarshal(body, &inv) != nil || inv.Mode != "acme" || len(inv.Certificates) != 1 {
		t.Fatalf("GET /admin/certificates: %d %s", code, body)
	}
	if c := inv.Certificates[0]; c.Name != "demo.test" || c.Status != "valid" || !c.NotAfter.Equal(leaf.NotAfter) || c.LastEvent != "cert_obtained" {
		t.Errorf("inventory entry %+v; want demo.test valid until %s", c, leaf.NotAfter)
	}
	code, _, body = adm.do(t, http.MethodGet, "/metrics", admToken, nil, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `wakegate_certificate_expiry_days{name="demo.test"}`) {
		t.Errorf("/metrics has no expiry for demo.test: %d", code)
	}
}

// TestTLSACMEExternalAccount obtains a certificate from a CA that requires
// an external account binding, with the key from the environment.
func TestTLSACMEExternalAccount(t *testing.T) {
	const kid, mac = "wakegate-test-kid", "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"
	t.Setenv("WAKEGATE_TEST_EAB_MAC", mac)
	pub, plain := tlsListeners(t)
	pb := pebbletest.Start(t, pebbletest.Options{HTTPPort: portNum(plain), TLSPort: portNum(pub), EAB: map[string]string{kid: mac}})
	gw := tlsStart(t, fmt.Sprintf(`tls:
  mode: acme
  names: [eab.test]
  ca: %q
  email: ops@eab.test
  trusted_roots: [%q]
  eab: {key_id: %q, mac_key: "env:WAKEGATE_TEST_EAB_MAC"}
`, pb.Directory, pb.ListenerRootPEM, kid), pub, plain)
	waitCert(t, gw.addr, "eab.test", pb.Roots)
}
