package edge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
)

// TestTLSReadsAndWritesOnTheSocket: beneath an accepted *tls.Conn, the
// reads and writes are the socket's (socketConn over the listener's own
// wrapper, which still gives its place back on Close), and a round trip
// both ways, a deadline and the peer's close behave as on net.Conn.
func TestTLSReadsAndWritesOnTheSocket(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limit := NewConnLimit(1, access.ClientIP{}, prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))
	lst := NewTLSListener(limit.Listener(inner), serverConfig(t), 5*time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}), false)
	defer func() { _ = lst.Close() }()

	client, err := tls.Dial("tcp", inner.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c, err := lst.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		t.Fatalf("accepted %T, want *tls.Conn", c)
	}
	sc, ok := tc.NetConn().(*socketConn)
	if !ok {
		t.Fatalf("beneath TLS: %T, want *socketConn", tc.NetConn())
	}
	if _, ok := sc.PlainConn().(*limitConn); !ok {
		t.Fatalf("socketConn wraps %T, want the listener's *limitConn", sc.PlainConn())
	}

	msg := make([]byte, 100_000) // several records, more than a socket buffer holds at once
	for i := range msg {
		msg[i] = byte(i)
	}
	go func() { _, _ = client.Write(msg) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(tc, got); err != nil || string(got) != string(msg) {
		t.Fatalf("server read %v (equal %t)", err, string(got) == string(msg))
	}
	go func() { _, _ = tc.Write(msg) }()
	if _, err := io.ReadFull(client, got); err != nil || string(got) != string(msg) {
		t.Fatalf("client read %v (equal %t)", err, string(got) == string(msg))
	}

	_ = tc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := tc.Read(got); err == nil {
		t.Fatalf("a read past its deadline succeeded")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("a read past its deadline: %v, want a timeout", err)
	}
	_ = client.Close()
	// A timed-out tls.Conn may not be read again; the peer's close is seen
	// on the socket itself.
	_ = sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(sc); err != nil {
		t.Fatalf("reading to the peer's close: %v", err)
	}
	if err := tc.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	limit.mu.Lock()
	open := limit.open[netip.MustParseAddr("127.0.0.1")]
	limit.mu.Unlock()
	if open != 0 {
		t.Fatalf("after the close the client holds %d places, want 0", open)
	}
}

// serverConfig is a TLS config with a fresh self-signed P-256 certificate.
func serverConfig(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"http/1.1"}}
}
