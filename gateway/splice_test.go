package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestLargeBodiesThroughGateway checks bodies of 256 KiB and 1 MiB, which
// the proxy hands to the response writers' ReadFrom (the recorder passes
// it on), arrive byte-exact through the gateway's handler, one after the
// other on one client connection.
func TestLargeBodiesThroughGateway(t *testing.T) {
	pattern := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i/251)
		}
		return b
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil {
			return // the health check: 200, empty
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(pattern(n))
	}))
	defer backend.Close()
	gw := e2eStartInProcess(t, fmt.Sprintf("apps:\n  - slug: big\n    upstream: %q\n    kind: api\n", backend.URL))
	// The route is published once the self-probe through the gateway's
	// own listener has passed; the requests below go around it.
	testbin.Eventually(t, "the app ready", func() bool {
		st, ok := gw.g.Apps().Status("big")
		return ok && st.Phase == appstatus.PhaseReady
	})
	front := httptest.NewServer(gw.g.Handler())
	defer front.Close()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, n := range []int{256 << 10, 1 << 20, 256 << 10} {
		res, err := c.Get(front.URL + "/apps/big/x?n=" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !bytes.Equal(got, pattern(n)) {
			t.Fatalf("GET %d bytes: status %d, %d bytes, %v", n, res.StatusCode, len(got), err)
		}
	}
}
