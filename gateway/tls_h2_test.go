package gateway_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestTLSRapidResetClosesConnection opens HTTP/2 streams to a home that
// answers slowly and cancels each at once (the rapid-reset pattern): past
// tls.http2.max_resets_per_second and its burst, the gateway closes the
// connection and says so in the log.
func TestTLSRapidResetClosesConnection(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(slow.Close)
	pub, plain := tlsListeners(t)
	gw := tlsStartHomes(t, fmt.Sprintf("  - id: slow\n    provider: static\n    endpoint: %q\n    probe: tcp\n", slow.URL), `tls:
  mode: internal
  names: [dev.test]
  http2: {max_resets_per_second: 2}
`, pub, plain)
	roots := internalRoots(t, gw)
	waitCert(t, gw.addr, "dev.test", roots)

	conn, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "dev.test", RootCAs: roots, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	sent := 0
send:
	for i := range 5000 {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "dev.test"}, {":path", "/node/slow/x"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break
		}
		sent++
		select {
		case <-closed:
			break send
		default:
		}
	}
	select {
	case <-closed:
	case <-time.After(testbin.WaitLimit):
		t.Fatalf("the connection is still open after %d cancelled streams", sent)
	}
	testbin.Eventually(t, "the rapid-reset log line", func() bool {
		return len(gw.logs.Lines(`"closed an HTTP/2 connection that cancelled too many streams"`)) > 0
	})
}

// internalRoots trusts the internal CA of gw's data directory.
func internalRoots(t testing.TB, gw *tlsGateway) *x509.CertPool {
	t.Helper()
	pemRoot, err := os.ReadFile(filepath.Join(gw.data, "internal-ca", "root.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemRoot)
	return roots
}
