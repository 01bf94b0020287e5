package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what the API server's flags name: a CA, a serving certificate for
// 127.0.0.1 signed by it, and the service-account key pair.
type pki struct {
	caFile, certFile, keyFile string
	saPub, saKey              string
}

// makePKI writes the CA, the serving pair and the service-account pair
// into dir.
func makePKI(dir string) (pki, error) {
	p := pki{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "apiserver.pem"),
		keyFile:  filepath.Join(dir, "apiserver-key.pem"),
		saPub:    filepath.Join(dir, "sa.pub"),
		saKey:    filepath.Join(dir, "sa-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{
		{p.caFile, "CERTIFICATE", caDER},
		{p.certFile, "CERTIFICATE", der},
		{p.saPub, "PUBLIC KEY", saPub},
	} {
		if err := writePEM(f.path, f.typ, f.der); err != nil {
			return p, err
		}
	}
	for _, f := range []struct {
		path string
		key  *ecdsa.PrivateKey
	}{{p.keyFile, key}, {p.saKey, saKey}} {
		der, err := x509.MarshalECPrivateKey(f.key)
		if err != nil {
			return p, err
		}
		if err := writePEM(f.path, "EC PRIVATE KEY", der); err != nil {
			return p, err
		}
	}
	return p, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
