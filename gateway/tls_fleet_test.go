package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/pebbletest"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestTLSFleetObtainsOnce starts two gateways with TLS from a real ACME
// server (Pebble) on one real Redis: the certificate is ordered once, and
// both serve it. Pebble validates HTTP-01 on gateway A's plain listener
// only, and B starts first: whichever gateway wins the lock, A answers
// the challenge, from the shared store when B placed the order.
func TestTLSFleetObtainsOnce(t *testing.T) {
	t.Parallel()
	srv := registrytest.StartRedis(t)
	pubA, plainA := tlsListeners(t)
	pubB, plainB := tlsListeners(t)
	pb := pebbletest.Start(t, pebbletest.Options{HTTPPort: portNum(plainA), TLSPort: portNum(pubA)})
	conf := func(instance string) string {
		return fmt.Sprintf(`instance: %s
redis:
  url: %q
  prefix: tlsfleet
tls:
  mode: acme
  names: [demo.test]
  ca: %q
  email: ops@demo.test
  trusted_roots: [%q]
  challenges: [http-01]
`, instance, srv.URL(), pb.Directory, pb.ListenerRootPEM)
	}
	gwB := tlsStart(t, conf("gw-b"), pubB, plainB)
	gwA := tlsStart(t, conf("gw-a"), pubA, plainA)

	leafA := waitCert(t, gwA.addr, "demo.test", pb.Roots)
	leafB := waitCert(t, gwB.addr, "demo.test", pb.Roots)
	if leafA.SerialNumber.Cmp(leafB.SerialNumber) != 0 {
		t.Errorf("gateways serve different certificates: serial %s on A, %s on B", leafA.SerialNumber, leafB.SerialNumber)
	}
	if n := pb.Orders(); n != 1 {
		t.Errorf("pebble saw %d orders, want 1", n)
	}
	obtained := 0
	for _, gw := range []*tlsGateway{gwA, gwB} {
		obtained += strings.Count(gw.logs.String(), "certificate obtained")
	}
	if obtained != 1 {
		t.Errorf("%d gateways logged that they obtained the certificate, want 1", obtained)
	}
	// Both gateways serve the shared demo home over HTTPS. One of them may
	// answer 503 with Retry-After while the home moves between them (a
	// wake or a restart in progress): that is the answer a waking home
	// gets, so the request is made again until it is served.
	for _, gw := range []*tlsGateway{gwA, gwB} {
		c := tlsClient(t, gw.addr, pb.Roots, false)
		testbin.Eventually(t, "the app served over HTTPS by "+gw.addr, func() bool {
			res, body := e2eGet(t, c, "https://demo.test/apps/demo/whoami", nil)
			if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "" {
				return false
			}
			if res.StatusCode != 200 {
				t.Fatalf("GET over HTTPS: %d %s", res.StatusCode, body)
			}
			return true
		})
	}
}
