package proxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wakegate/wakegate/h1serve"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// TestForwarderCancelThroughTheLoop: a request served by the loop whose
// upstream does not answer, and whose client then leaves. The exchange's
// watch is the loop's (ctxhook), so this is the path the gateway takes:
// the client leaving must cut the upstream read at once, the round trip
// returns the context's error, and the upstream sees its request end.
func TestForwarderCancelThroughTheLoop(t *testing.T) {
	arrived := make(chan struct{}, 1)
	upGone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			close(upGone)
		case <-time.After(20 * time.Second):
		}
	}))
	defer up.Close()
	d := &net.Dialer{}
	f := h1client.NewForwarder(h1client.NewPool(d.DialContext, 4, time.Minute), 0, http.DefaultTransport, nil)
	defer f.Pool().Close()

	result := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), "GET", up.URL+"/silent", nil)
		if err != nil {
			result <- err
			return
		}
		res, err := f.RoundTrip(req)
		if err == nil {
			res.Body.Close()
			err = errors.New("an answer from an upstream that never answered")
		}
		result <- err
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h1serve.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(ln) }()
	defer func() { _ = s.Close(); <-served }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-arrived
	_ = c.Close()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round trip: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the round trip still waits on its upstream after the client left")
	}
	select {
	case <-upGone:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's request did not end after the client left")
	}
	if n := f.Pool().Idle(); n != 0 {
		t.Errorf("%d idle connections after a cut exchange, want 0", n)
	}
}
