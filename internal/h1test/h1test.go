// Package h1test starts the wakegate loop (h1serve) on a loopback
// listener for tests, with net/http behind its hand-off, as the gateway's
// plain public listener runs them.
package h1test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/h1serve"
)

// Serve serves h on 127.0.0.1 until the test ends and returns the
// listener's address. Requests the loop does not take (chunked bodies,
// upgrades, heads that are not plain) go to a net/http server on the same
// handler.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	return serve(t, h, nil)
}

// ServeTLS is Serve over TLS with conf, as the gateway's HTTPS listener
// runs the loop: the loop reads each connection's requests after the
// handshake, and hands to net/http what it does not take.
func ServeTLS(t testing.TB, h http.Handler, conf *tls.Config) string {
	t.Helper()
	return serve(t, h, conf)
}

func serve(t testing.TB, h http.Handler, conf *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	quiet := log.New(io.Discard, "", 0)
	std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
	// As the gateway does: a request the loop serves names net/http's
	// server as its own, so handlers that ask (ReverseProxy) act as
	// under it.
	base := context.WithValue(context.Background(), http.ServerContextKey, std)
	loop := &h1serve.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet, BaseContext: base}
	hand := loop.Handoff(addr)
	if conf != nil {
		ln = handshakes{Listener: ln, conf: conf}
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = std.Serve(hand) })
	wg.Go(func() { _ = loop.Serve(ln) })
	t.Cleanup(func() {
		_ = loop.Close()
		_ = std.Close()
		wg.Wait()
	})
	return addr.String()
}

// handshakes accepts TLS connections with their handshakes done, as the
// gateway's TLS listener hands them to the loop (one at a time here:
// enough for tests). A connection whose handshake fails is dropped.
type handshakes struct {
	net.Listener
	conf *tls.Config
}

func (l handshakes) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := tls.Server(c, l.conf)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = tc.HandshakeContext(ctx)
		cancel()
		if err == nil {
			return tc, nil
		}
		_ = c.Close()
	}
}
