package edge

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/internal/testbin"
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

// TestSocketWriteDeadline: beneath TLS a write deadline reaches the
// socket only when a write waits for room or the deadline has passed,
// and behaves as net.Conn's does: a response-sized write under a
// deadline that is then lifted leaves the socket without one; a write
// after its deadline fails; a write that waits is cut at its deadline;
// a deadline set in the past ends a write waiting with none; and a zero
// deadline takes one off, so later writes go on.
func TestSocketWriteDeadline(t *testing.T) {
	pair := func(t *testing.T) (*socketConn, net.Conn) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = peer.Close() })
		sc, ok := rawSocket(c).(*socketConn)
		if !ok {
			t.Skip("no socket calls on this platform")
		}
		return sc, peer
	}
	timedOut := func(err error) bool {
		ne, ok := err.(net.Error)
		return ok && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
	}
	big := make([]byte, 64<<20) // more than the socket buffers hold

	t.Run("lifted before any wait", func(t *testing.T) {
		sc, peer := pair(t)
		for range 3 {
			_ = sc.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := sc.Write([]byte("response")); err != nil {
				t.Fatal(err)
			}
			if sc.onSock {
				t.Fatal("the deadline went on the socket for a write that did not wait")
			}
			_ = sc.SetWriteDeadline(time.Time{})
		}
		got := make([]byte, 24)
		if _, err := io.ReadFull(peer, got); err != nil || string(got) != "responseresponseresponse" {
			t.Fatalf("peer read %q, %v", got, err)
		}
	})
	t.Run("passed", func(t *testing.T) {
		sc, _ := pair(t)
		_ = sc.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		time.Sleep(40 * time.Millisecond)
		if n, err := sc.Write([]byte("late")); n != 0 || !timedOut(err) {
			t.Fatalf("write after its deadline: %d, %v; want 0 and a timeout", n, err)
		}
	})
	t.Run("wait cut at the deadline", func(t *testing.T) {
		sc, _ := pair(t)
		_ = sc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := sc.Write(big)
		if !timedOut(err) || n >= len(big) {
			t.Fatalf("write into a peer that does not read: %d, %v; want a timeout", n, err)
		}
		// A zero deadline takes it off: the peer reads, and writes go on.
		if err := sc.SetWriteDeadline(time.Time{}); err != nil || sc.onSock {
			t.Fatalf("lifting the deadline: %v (on the socket: %v)", err, sc.onSock)
		}
	})
	for name, dl := range map[string]time.Time{"past": time.Unix(1, 0), "later": time.Now().Add(300 * time.Millisecond)} {
		t.Run(name+" deadline ends a wait", func(t *testing.T) {
			sc, _ := pair(t)
			done := make(chan error, 1)
			go func() { _, err := sc.Write(big); done <- err }()
			time.Sleep(100 * time.Millisecond) // the write waits for room, with no deadline
			_ = sc.SetWriteDeadline(dl)
			select {
			case err := <-done:
				if !timedOut(err) {
					t.Fatalf("the waiting write ended with %v, want a timeout", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a deadline set while the write waited did not end it")
			}
		})
	}
	t.Run("lifted after a wait", func(t *testing.T) {
		sc, peer := pair(t)
		_ = sc.SetWriteDeadline(time.Now().Add(time.Minute))
		go func() { _, _ = io.Copy(io.Discard, peer) }()
		if _, err := sc.Write(big); err != nil {
			t.Fatalf("write with a reader: %v", err)
		}
		_ = sc.SetWriteDeadline(time.Time{})
		if sc.onSock {
			t.Fatal("the socket keeps a write deadline after a zero one")
		}
		if _, err := sc.Write([]byte("more")); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHandshakesReuseTheirGoroutine: handshakes that come one after
// another run on the goroutine of the first, which waits for the next;
// Close ends its wait.
func TestHandshakesReuseTheirGoroutine(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lst := NewTLSListener(inner, serverConfig(t), 5*time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}), false)
	defer func() { _ = lst.Close() }()
	const n = 5
	for i := range n {
		client, err := tls.Dial("tcp", inner.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		c, err := lst.Accept()
		if err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
		_ = c.Close()
		_ = client.Close()
		testbin.Eventually(t, "the handshake's goroutine waiting for the next", func() bool { return lst.shakers.Idle() == 1 })
	}
	if got := lst.shakers.Started(); got != 1 {
		t.Fatalf("%d goroutines for %d handshakes one after another, want 1", got, n)
	}
	_ = lst.Close()
	if got := lst.shakers.Idle(); got != 0 {
		t.Fatalf("%d handshake goroutines still waiting after Close", got)
	}
}
