package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/pebbletest"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestTLSOnDemandHostRouting gets certificates at the first handshake for
// names that map to a registered app or home (host routing), and for
// nothing else: an unregistered name, an outside name and an empty server
// name fail the handshake with no order at the CA, and a thousand random
// unregistered names leave storage as it was.
func TestTLSOnDemandHostRouting(t *testing.T) {
	t.Parallel()
	pub, plain := tlsListeners(t)
	pb := pebbletest.Start(t, pebbletest.Options{HTTPPort: portNum(plain), TLSPort: portNum(pub)})
	gw := tlsStart(t, fmt.Sprintf(`admin:
  listen: "127.0.0.1:0"
  tokens: [%q]
hosts:
  apps_domain: apps.test
  nodes_domain: nodes.test
tls:
  mode: on_demand
  ca: %q
  email: ops@apps.test
  trusted_roots: [%q]
`, admToken, pb.Directory, pb.ListenerRootPEM), pub, plain)

	// The first handshake for demo.apps.test obtains its certificate.
	c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "demo.apps.test", RootCAs: pb.Roots})
	if err != nil {
		t.Fatalf("first handshake for demo.apps.test: %v", err)
	}
	_ = c.Close()
	if n := pb.Orders(); n != 1 {
		t.Fatalf("pebble saw %d orders after the first handshake, want 1", n)
	}
	client := tlsClient(t, gw.addr, pb.Roots, true)
	res, body := e2eGet(t, client, "https://demo.apps.test/whoami", nil)
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 || !strings.Contains(string(body), `"path":"/apps/demo/whoami"`) {
		t.Fatalf("GET https://demo.apps.test/whoami: %d %s (%s); want the demo app at / over h2", res.StatusCode, body, res.Proto)
	}
	// A home by its host: the home sees its /node/{target} path.
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pb.Roots}, HandshakeTimeout: testbin.WaitLimit,
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", gw.addr)
		}}
	ws, wres, err := d.Dial("wss://demo.nodes.test/ws", nil)
	if err != nil {
		t.Fatalf("wss://demo.nodes.test/ws: %v (%v)", err, wres)
	}
	e2eHello(t, ws, "demo")
	_ = ws.Close()
	if n := pb.Orders(); n != 2 {
		t.Fatalf("pebble saw %d orders after two names, want 2", n)
	}

	before := storedFiles(t, gw.data)
	for _, name := range []string{"nope.apps.test", "nope.nodes.test", "evil.example", "apps.test", "a.demo.apps.test", ""} {
		conf := &tls.Config{ServerName: name, RootCAs: pb.Roots}
		if name == "" {
			conf.InsecureSkipVerify = true // the server must refuse it all the same
		}
		if c, err := tls.Dial("tcp", gw.addr, conf); err == nil {
			_ = c.Close()
			t.Errorf("handshake for %q succeeded; want it refused", name)
		}
	}
	var wg sync.WaitGroup
	names := make(chan string)
	for range 8 {
		wg.Go(func() {
			for name := range names {
				c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: name, RootCAs: pb.Roots})
				if err == nil {
					_ = c.Close()
					t.Errorf("handshake for random %q succeeded", name)
				}
			}
		})
	}
	for i := range 1000 {
		var b [6]byte
		_, _ = rand.Read(b[:])
		domain := []string{"apps.test", "nodes.test", "example.org"}[i%3]
		names <- hex.EncodeToString(b[:]) + "." + domain
	}
	close(names)
	wg.Wait()
	if n := pb.Orders(); n != 2 {
		t.Errorf("pebble saw %d orders after refused names, want still 2", n)
	}
	if after := storedFiles(t, gw.data); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("refused names changed certificate storage:\nbefore %v\nafter  %v", before, after)
	}
	// A name refused a moment ago gets its certificate once its app is
	// registered: the decisions follow the apps.
	if c, err := tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "late.apps.test", RootCAs: pb.Roots}); err == nil {
		_ = c.Close()
		t.Fatal("late.apps.test got a certificate before its app existed")
	}
	adm := admServe(t, gw.e2eGateway)
	if code, _, body := adm.do(t, "PUT", "/admin/apps/late", admToken, nil, map[string]any{"home": "demo", "path": "/apps/demo"}); code != http.StatusCreated {
		t.Fatalf("PUT /admin/apps/late: %d %s", code, body)
	}
	c, err = tls.Dial("tcp", gw.addr, &tls.Config{ServerName: "late.apps.test", RootCAs: pb.Roots})
	if err != nil {
		t.Fatalf("late.apps.test after its app was registered: %v", err)
	}
	_ = c.Close()
	if n := pb.Orders(); n != 3 {
		t.Errorf("pebble saw %d orders, want 3", n)
	}
	_, _, metrics := adm.do(t, "GET", "/metrics", admToken, nil, nil)
	for _, series := range []string{`wakegate_tls_on_demand_refused_total{reason="not_allowed"}`, "wakegate_tls_handshake_failures_total"} {
		if v := metricValue(string(metrics), series); v < 1 {
			t.Errorf("%s = %v, want the refusals counted", series, v)
		}
	}
	// The plain-HTTP listener redirects registered hosts only.
	for host, want := range map[string]int{"demo.apps.test": http.StatusPermanentRedirect, "nope.apps.test": http.StatusNotFound,
		"demo.nodes.test": http.StatusPermanentRedirect, "nope.nodes.test": http.StatusNotFound} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+gw.httpAddr+"/x", nil)
		req.Host = host
		res, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != want || (want == http.StatusNotFound) != (res.Header.Get("Location") == "") {
			t.Errorf("http://%s/x: %d Location %q, want %d", host, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
	// Host routes: an unknown host under a domain is 404, not the path routes.
	req, _ := http.NewRequest(http.MethodGet, "https://demo.apps.test/apps/demo/", nil)
	req.Host = "nope.apps.test"
	if res, err := client.Do(req); err == nil {
		_ = res.Body.Close()
		if res.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host nope.apps.test on a demo.apps.test connection: %d, want 421", res.StatusCode)
		}
	}
}

// storedFiles lists the files under data/certificates.
func storedFiles(t testing.TB, data string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(data, "certificates")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".lock") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// metricValue returns the value of one series in a /metrics text, or -1.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
