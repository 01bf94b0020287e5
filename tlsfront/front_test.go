package tlsfront

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// writePair writes a fresh self-signed pair for name into dir.
func writePair(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	c, _, err := SelfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// The key first: a reload between the two writes must not pair a new
	// certificate with the old key.
	if err := os.WriteFile(kf+".tmp", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cf+".tmp", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{kf, cf} {
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	return cf, kf
}

// TestFilesReloadOnChange serves the new pair once the files change, from
// the first handshake after the look at the files that follows: in a
// synctest bubble, a handshake at once still gets the old pair, one
// fileCheckEvery later the new one.
func TestFilesReloadOnChange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cf, kf := writePair(t, dir, "one.test")
		f, err := New(Options{Mode: Files, CertFile: cf, KeyFile: kf})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		leafName := func() string {
			c, err := f.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "any.test"})
			if err != nil {
				t.Fatal(err)
			}
			l, err := x509.ParseCertificate(c.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			return l.Subject.CommonName
		}
		if got := leafName(); got != "one.test" {
			t.Fatalf("serving %q, want one.test", got)
		}
		writePair(t, dir, "two.test")
		// Modification times may tie within the file system's granularity.
		later := time.Now().Add(time.Minute)
		_ = os.Chtimes(cf, later, later)
		_ = os.Chtimes(kf, later, later)
		if got := leafName(); got != "one.test" {
			t.Fatalf("serving %q at once after the change, want one.test until the next look", got)
		}
		time.Sleep(fileCheckEvery)
		if got := leafName(); got != "two.test" {
			t.Fatalf("serving %q one look later, want the changed files' two.test", got)
		}
	})
}

// TestFilesRequiresReadablePair fails New on a missing file.
func TestFilesRequiresReadablePair(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Mode: Files, CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}); err == nil {
		t.Fatal("New with missing files succeeded")
	}
}

// TestInternalIssuesFromItsRoot serves, in the internal mode, a
// certificate for the configured name that verifies against the CA's
// root, and keeps the same root across restarts.
func TestInternalIssuesFromItsRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := New(Options{Mode: Internal, Names: []string{"dev.test"}, DataDir: dir, HTTP01: true, TLSALPN01: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(f.Root()) {
		t.Fatalf("Root is not PEM: %q", f.Root())
	}
	var cert *tls.Certificate
	conn, peer := net.Pipe() // certmagic logs the handshake's remote address
	defer func() { _, _ = conn.Close(), peer.Close() }()
	// certmagic issues the certificate in the background and says
	// nothing when it is done: ask until it is there.
	testbin.Eventually(t, "a certificate for dev.test", func() bool {
		cert, err = f.TLSConfig().GetCertificate(&tls.ClientHelloInfo{ServerName: "dev.test", Conn: conn})
		return err == nil
	})
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "dev.test", Roots: roots}); err != nil {
		t.Fatalf("leaf does not verify against the internal root: %v", err)
	}
	again, err := OpenLocalCA(filepath.Join(dir, "internal-ca"))
	if err != nil {
		t.Fatal(err)
	}
	if string(again.RootPEM()) != string(f.Root()) {
		t.Fatal("the internal CA's root changed when opened again")
	}
}

// TestOnDemandNeedsDecider refuses on_demand without a decision.
func TestOnDemandNeedsDecider(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Mode: OnDemand, DataDir: t.TempDir()}); err == nil {
		t.Fatal("on_demand without a Decider was accepted")
	}
}
