// Package h1test starts the wakegate loop (h1serve) on a loopback
// listener for tests, with net/http behind its hand-off, as the gateway's
// plain public listener runs them.
package h1test

import (
	"context"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := log.New(io.Discard, "", 0)
	std := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
	// As the gateway does: a request the loop serves names net/http's
	// server as its own, so handlers that ask (ReverseProxy) act as
	// under it.
	base := context.WithValue(context.Background(), http.ServerContextKey, std)
	loop := &h1serve.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet, BaseContext: base}
	hand := loop.Handoff(ln.Addr())
	var wg sync.WaitGroup
	wg.Go(func() { _ = std.Serve(hand) })
	wg.Go(func() { _ = loop.Serve(ln) })
	t.Cleanup(func() {
		_ = loop.Close()
		_ = std.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
