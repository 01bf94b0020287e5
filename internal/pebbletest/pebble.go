// Package pebbletest runs a real ACME server for tests: Pebble
// (github.com/letsencrypt/pebble) with pebble-challtestsrv as its DNS
// server, which resolves every name to 127.0.0.1, both on loopback ports.
// Pebble validates HTTP-01 and TLS-ALPN-01 challenges for real, against
// the ports the test names. scripts/test.sh installs both programs.
package pebbletest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// Pebble is a running Pebble and its DNS server.
type Pebble struct {
	// Directory is the ACME directory URL.
	Directory string
	// ListenerRootPEM is the PEM file of the certificate Pebble's own
	// HTTPS listener uses (the ACME client must trust it).
	ListenerRootPEM string
	// Roots trusts the chains Pebble issues (its root, fetched from its
	// management interface).
	Roots *x509.CertPool

	log *lockedBuffer
}

// Options say where Pebble validates challenges.
type Options struct {
	// HTTPPort is where Pebble connects for HTTP-01, TLSPort for
	// TLS-ALPN-01 (on 127.0.0.1, which every name resolves to).
	HTTPPort, TLSPort int
	// EAB, when set, makes an external account binding required, with
	// these key ids and base64url HMAC keys.
	EAB map[string]string
}

// Start runs challtestsrv and Pebble until the test ends. It skips the
// test when they are not installed, unless CI is set.
func Start(t testing.TB, o Options) *Pebble {
	t.Helper()
	pebbleBin, err1 := exec.LookPath("pebble")
	challBin, err2 := exec.LookPath("pebble-challtestsrv")
	if err1 != nil || err2 != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pebble or pebble-challtestsrv is not installed (scripts/test.sh installs them)")
		}
		t.Skip("pebble or pebble-challtestsrv is not installed (scripts/test.sh installs them)")
	}
	dir := t.TempDir()
	dnsAddr := freeAddr(t)
	run(t, challBin, nil, nil, "-dnsserver", dnsAddr, "-management", freeAddr(t),
		"-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
		"-http01", "", "-tlsalpn01", "", "-https01", "", "-doh", "")

	certFile, keyFile := filepath.Join(dir, "pebble.crt"), filepath.Join(dir, "pebble.key")
	writeListenerCert(t, certFile, keyFile)
	listen, mgmt := freeAddr(t), freeAddr(t)
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": o.HTTPPort, "tlsPort": o.TLSPort,
		"ocspResponderURL": "", "externalAccountBindingRequired": len(o.EAB) > 0, "externalAccountMACKeys": o.EAB,
		"retryAfter": map[string]int{"authz": 0, "order": 0},
	}}
	confFile := filepath.Join(dir, "pebble.json")
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(confFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Pebble{Directory: "https://" + listen + "/dir", ListenerRootPEM: certFile, log: &lockedBuffer{}}
	run(t, pebbleBin, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}, p.log,
		"-config", confFile, "-dnsserver", dnsAddr)

	listenerPool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(certFile)
	listenerPool.AppendCertsFromPEM(pemBytes)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: listenerPool}}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	var root []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := client.Get("https://" + mgmt + "/roots/0")
		if err == nil {
			root, _ = io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not start: %v\n%s", err, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Roots = x509.NewCertPool()
	if !p.Roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root is not PEM: %q", root)
	}
	return p
}

// Orders returns the number of new orders Pebble has received.
func (p *Pebble) Orders() int {
	return strings.Count(p.log.String(), "POST /order-plz")
}

// Log returns Pebble's output so far.
func (p *Pebble) Log() string { return p.log.String() }

// run starts bin with args and stops it when the test ends.
func run(t testing.TB, bin string, env []string, out io.Writer, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	buf := &lockedBuffer{}
	if out == nil {
		out = buf
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
}

// freeAddr returns a loopback address with a port free a moment ago,
// from outside the kernel's ephemeral range (see testbin.FreePort).
func freeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testbin.FreePort(t)))
}

// writeListenerCert writes a self-signed certificate for Pebble's HTTPS
// listener on 127.0.0.1 and localhost.
func writeListenerCert(t testing.TB, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "pebble test listener"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer is a buffer written by a process and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
