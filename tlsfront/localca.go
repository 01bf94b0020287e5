package tlsfront

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"
)

// The internal CA's lifetimes: the root lasts ten years, a leaf a week
// (certmagic renews it in the last third).
const (
	rootLifetime = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
)

// LocalCA is a certificate authority kept in a folder (root.crt, root.key)
// that issues short-lived leaf certificates: the internal mode, for
// development. Clients trust it by installing RootPEM.
type LocalCA struct {
	root    *x509.Certificate
	rootPEM []byte
	key     crypto.Signer
}

// OpenLocalCA loads the CA in dir, creating it (and dir) at first use.
func OpenLocalCA(dir string) (*LocalCA, error) {
	crtPath, keyPath := filepath.Join(dir, "root.crt"), filepath.Join(dir, "root.key")
	crtPEM, err := os.ReadFile(crtPath)
	if errors.Is(err, os.ErrNotExist) {
		return createLocalCA(dir, crtPath, keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("internal CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("internal CA: %w", err)
	}
	return parseLocalCA(crtPEM, keyPEM)
}

func createLocalCA(dir, crtPath, keyPath string) (*LocalCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("internal CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "wakegate internal root " + now.UTC().Format("2006-01-02")},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(rootLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("internal CA root: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("internal CA key: %w", err)
	}
	crtPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("internal CA: %w", err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("internal CA: %w", err)
	}
	if err := os.WriteFile(crtPath, crtPEM, 0o644); err != nil {
		return nil, fmt.Errorf("internal CA: %w", err)
	}
	return parseLocalCA(crtPEM, keyPEM)
}

func parseLocalCA(crtPEM, keyPEM []byte) (*LocalCA, error) {
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("internal CA: root.crt or root.key is not PEM")
	}
	root, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("internal CA root: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("internal CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("internal CA key: not a signing key")
	}
	return &LocalCA{root: root, rootPEM: crtPEM, key: signer}, nil
}

// RootPEM is the root certificate, PEM-encoded, for clients to trust.
func (ca *LocalCA) RootPEM() []byte { return bytes.Clone(ca.rootPEM) }

// Issue signs a leaf certificate for the CSR's names (certmagic.Issuer).
func (ca *LocalCA) Issue(_ context.Context, csr *x509.CertificateRequest) (*certmagic.IssuedCertificate, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("internal CA: CSR signature: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: firstName(csr)},
		DNSNames:     csr.DNSNames,
		IPAddresses:  csr.IPAddresses,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.root, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("internal CA: sign: %w", err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.rootPEM...)
	return &certmagic.IssuedCertificate{Certificate: chain}, nil
}

// IssuerKey names this issuer in storage (certmagic.Issuer).
func (ca *LocalCA) IssuerKey() string { return "wakegate-internal" }

func firstName(csr *x509.CertificateRequest) string {
	if len(csr.DNSNames) > 0 {
		return csr.DNSNames[0]
	}
	return csr.Subject.CommonName
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

var _ certmagic.Issuer = (*LocalCA)(nil)

// SelfSigned returns a fresh self-signed certificate for name, valid for a
// year and kept in memory only, and a pool that trusts exactly it (the
// gateway's self-probe pins it).
func SelfSigned(name string) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-signed key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}
