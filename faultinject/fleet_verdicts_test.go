package faultinject

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// warm reports whether g holds a fresh warm verdict of home id (its admin
// API's view).
func (g *fiGateway) warm(t *testing.T, id string) bool {
	t.Helper()
	code, body := g.adminSend(t, http.MethodGet, "/admin/homes/"+id, "")
	if code != http.StatusOK {
		t.Fatalf("GET /admin/homes/%s: %d %s", id, code, body)
	}
	var v struct {
		Warm bool `json:"warm"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET /admin/homes/%s: %v: %s", id, err, body)
	}
	return v.Warm
}

// TestFleetVerdictDropsEverywhere warms two homes on two gateways with a
// warm TTL far longer than the test, then takes each down through one
// gateway: the other drops its verdict at once. A forward on A that finds
// a static home's upstream gone is one way (B has no other way to learn
// it); a suspend through A's admin API is the other (on one machine B
// also sees the exec home's process end, as it watches the process it
// adopted).
func TestFleetVerdictDropsEverywhere(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	t.Cleanup(up.Close)
	srv := registrytest.StartRedis(t)
	homes := slices.Concat(fleetTwoHomes[:1], []any{
		map[string]any{"id": "s1", "target": "steady", "provider": "static", "endpoint": up.URL, "probe": "tcp"},
	})
	gws := fleetStart(t, srv, 2, fiOptions{
		admin: true,
		wake:  map[string]any{"warm_ttl": "1h", "ready_timeout": "2s"},
		extra: map[string]any{"homes": homes},
	})
	a, b := gws[0], gws[1]
	c := fleetClient()
	for _, path := range []string{fiWhoami, "/node/steady/"} {
		for _, g := range gws {
			if res, body, err := g.get(c, path); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("warm up %s on %s: %v %s", path, g.url, err, body)
			}
		}
	}
	for _, id := range []string{"h1", "s1"} {
		if !a.warm(t, id) || !b.warm(t, id) {
			t.Fatalf("home %s is not warm on both gateways after a request through each", id)
		}
	}

	a.mustAdmin(t, http.MethodPost, "/admin/homes/h1/suspend", "", http.StatusOK)
	testbin.Eventually(t, "B drops its verdict of the home suspended through A", func() bool { return !b.warm(t, "h1") })

	// The static home's upstream goes away: A's next forward fails.
	up.CloseClientConnections()
	up.Listener.Close()
	if _, err := net.Dial("tcp", up.Listener.Addr().String()); err == nil {
		t.Fatal("the upstream still accepts connections")
	}
	if res, body, err := a.get(c, "/node/steady/"); err == nil && res.StatusCode == http.StatusOK {
		t.Fatalf("a request to a home whose upstream is gone: 200 %s", body)
	}
	testbin.Eventually(t, "B drops its verdict of the home whose forward failed on A", func() bool { return !b.warm(t, "s1") })
	for _, g := range gws {
		noPanic(t, g.Output())
	}
}
