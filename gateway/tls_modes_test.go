package gateway_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/tlsfront"
)

// TestTLSInternal serves the demo app over a certificate from the internal
// CA, which `wakegate tls root` prints for clients to trust.
func TestTLSInternal(t *testing.T) {
	t.Parallel()
	pub, plain := tlsListeners(t)
	gw := tlsStart(t, "tls:\n  mode: internal\n  names: [dev.test]\n", pub, plain)
	conf := filepath.Join(t.TempDir(), "root.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "data_dir: %q\ntls:\n  mode: internal\n", gw.data), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testbin.Build(t), "tls", "root", "--config", conf).Output()
	if err != nil {
		t.Fatalf("wakegate tls root: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(out) {
		t.Fatalf("wakegate tls root printed no certificate: %q", out)
	}
	waitCert(t, gw.addr, "dev.test", roots)
	c := tlsClient(t, gw.addr, roots, true)
	res, body := e2eGet(t, c, "https://dev.test/apps/demo/whoami", nil)
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Fatalf("GET over the internal CA: %d %s (%s)", res.StatusCode, body, res.Proto)
	}
}

// TestHostRoutingPlainHTTP routes by host on the plain listener too: an
// app at / on its host, the gateway's own paths on every host, 404 for an
// unknown name under the domain, path routes for any other host.
func TestHostRoutingPlainHTTP(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `wake:
  idle_timeout: 0s
hosts:
  apps_domain: apps.test
  nodes_domain: nodes.test
homes:
  - id: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
`)
	c := e2eClient(t)
	get := func(host, path string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+gw.addr+path, nil)
		req.Host = host
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for _, tc := range []struct {
		host, path string
		status     int
		contains   string
	}{
		{"demo.apps.test", "/whoami", 200, `"path":"/apps/demo/whoami"`},
		{"DEMO.apps.test:8080", "/whoami?x=1", 200, `"raw_query":"x=1"`},
		{"demo.nodes.test", "/whoami", 200, `"path":"/node/demo/whoami"`},
		{"nope.apps.test", "/whoami", 404, `"code":"unknown_host"`},
		{"nope.nodes.test", "/", 404, `"code":"home_not_found"`},
		{"a.demo.apps.test", "/", 404, `"code":"unknown_host"`},
		{"demo.apps.test", "/healthz", 404, `"path":"/apps/demo/healthz"`}, // the app's own answer, not the gateway's /healthz
		{"demo.apps.test", "/_wakegate/wake/app/demo", 200, `"ready"`},
		{"gateway.example", "/apps/demo/whoami", 200, `"path":"/apps/demo/whoami"`},
		{"apps.test", "/apps/demo/whoami", 200, `"path":"/apps/demo/whoami"`},
	} {
		res, body := get(tc.host, tc.path)
		if res.StatusCode != tc.status || !strings.Contains(body, tc.contains) {
			t.Errorf("Host %s %s: %d %s; want %d with %s", tc.host, tc.path, res.StatusCode, body, tc.status, tc.contains)
		}
	}
}

// TestTLSLeavesNoGoroutine serves HTTPS with a managed certificate (the
// internal CA), then stops: no goroutine of the listeners, the handshakes
// or certificate management outlives Close.
func TestTLSLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	t.Run("serve", func(t *testing.T) {
		pub, plain := tlsListeners(t)
		gw := tlsStart(t, "tls:\n  mode: internal\n  names: [dev.test]\n", pub, plain)
		roots := internalRoots(t, gw)
		waitCert(t, gw.addr, "dev.test", roots)
		c := tlsClient(t, gw.addr, roots, true)
		if res, body := e2eGet(t, c, "https://dev.test/healthz", nil); res.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz: %d %s", res.StatusCode, body)
		}
		// A handshake left half done must not hold the shutdown up.
		half, err := net.Dial("tcp", gw.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = half.Close() })
	})
	// certmagic's file storage refreshes a lock in a goroutine of its own
	// that sleeps 5s between looks and ends at the first look after the
	// lock was released; no API stops it sooner.
	if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/caddyserver/certmagic.keepLockfileFresh")); err != nil {
		t.Error(err)
	}
}

// TestTLSFilesReloaded serves the certificate files and, once they are
// replaced, the new pair, with no restart.
func TestTLSFilesReloaded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(name string) *x509.CertPool {
		c, pool, err := tlsfront.SelfSigned(name)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			path string
			blk  *pem.Block
		}{{keyFile, &pem.Block{Type: "PRIVATE KEY", Bytes: kder}}, {certFile, &pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}}} {
			if err := os.WriteFile(f.path+".tmp", pem.EncodeToMemory(f.blk), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.path+".tmp", f.path); err != nil {
				t.Fatal(err)
			}
		}
		later := time.Now().Add(time.Minute) // past the file system's time granularity
		_ = os.Chtimes(certFile, later, later)
		return pool
	}
	first := write("one.test")
	pub, plain := tlsListeners(t)
	gw := tlsStart(t, fmt.Sprintf("tls:\n  mode: files\n  cert_file: %q\n  key_file: %q\n", certFile, keyFile), pub, plain)
	waitCert(t, gw.addr, "one.test", first)
	second := write("two.test")
	waitCert(t, gw.addr, "two.test", second)
	if len(gw.logs.Lines(`"certificate files reloaded"`)) == 0 {
		t.Error("no log line for the reload")
	}
}

// TestTLSKeyExchange checks which key exchange a client that offers the
// post-quantum hybrid gets: the hybrid by default, X25519 with
// tls.key_exchange: classical.
func TestTLSKeyExchange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		setting string
		want    tls.CurveID
	}{
		{"", tls.X25519MLKEM768},
		{"  key_exchange: classical\n", tls.X25519},
	} {
		pub, plain := tlsListeners(t)
		gw := tlsStart(t, "tls:\n  mode: internal\n  names: [dev.test]\n"+tc.setting, pub, plain)
		var got tls.CurveID
		testbin.Eventually(t, "a handshake", func() bool {
			// The certificate is not what is checked here: the key exchange is.
			c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "dev.test", InsecureSkipVerify: true}) //nolint:gosec
			if err != nil {
				return false
			}
			got = c.ConnectionState().CurveID
			_ = c.Close()
			return true
		})
		if got != tc.want {
			t.Errorf("tls section %q: key exchange %v, want %v", tc.setting, got, tc.want)
		}
	}
}
