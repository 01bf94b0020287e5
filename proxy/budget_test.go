package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestStalledBodyCutWithinWindow sends 30MiB of a 32MiB body at once on
// a raw connection through a route that reads bodies ahead (to a spool
// file), then stops: the minimum rate is kept over a sliding window, so
// the proxy answers 408 within the grace and the window, not after the
// time the 30MiB earned at the rate averaged over the whole body (about
// 87 hours at the 100 bytes per second of this test).
func TestStalledBodyCutWithinWindow(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, nil)
	o := rateOptions()
	o.MinRateWindow = time.Second
	o.BodyBuffer, o.BodySpool, o.SpoolDir = 64<<10, 32<<20, t.TempDir()
	s, _ := front(t, o, func() *Route {
		return &Route{Kind: "node", Name: "n", HomeID: "h", Upstream: up.url(t, "/"),
			Acquire: func(http.ResponseWriter, *http.Request) (func(), bool) { return func() {}, true }}
	})
	c, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size, sent = 32 << 20, 30 << 20
	if _, err := fmt.Fprintf(c, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for n := 0; n < sent; n += len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	stalled := time.Now()
	// The grace (300ms) and the window (1s) with room for a loaded
	// machine; the old floor allowed hours.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer %v after the body stalled at %d of %d bytes: %v", time.Since(stalled), sent, size, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled body: %d; want 408", res.StatusCode)
	}
	t.Logf("cut %v after the stall", time.Since(stalled).Round(time.Millisecond))
	if n := len(up.seen()); n != 0 {
		t.Errorf("the upstream saw %d requests; want 0", n)
	}
}
