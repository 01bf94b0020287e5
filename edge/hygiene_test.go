package edge_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
)

func TestTrustedProxiesPeer(t *testing.T) {
	_, lan, _ := net.ParseCIDR("10.0.0.0/8")
	_, v6, _ := net.ParseCIDR("fd00::/8")
	tp := edge.TrustedProxies{lan, v6}
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"10.1.2.3:4000", true},
		{"[::ffff:10.1.2.3]:4000", true},
		{"[fd00::1]:4000", true},
		{"[fd00::1%eth0]:4000", false}, // zoned: not trusted
		{"192.0.2.1:4000", false},
		{"@", false}, // a Unix socket's peer
		{"10.1.2.3", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got := tp.Peer(r); got != tc.want {
			t.Errorf("Peer(%q) = %v, want %v", tc.remote, got, tc.want)
		}
		if got := (edge.TrustedProxies{}).Peer(r); got {
			t.Errorf("no networks: Peer(%q) = true", tc.remote)
		}
	}
}

func TestKeepsRequestID(t *testing.T) {
	for _, tc := range []struct {
		id      string
		trusted bool
		want    bool
	}{
		{"abc", true, true},
		{"abc", false, false},
		{"", true, false},
		{strings.Repeat("a", 128), true, true},
		{strings.Repeat("a", 129), true, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.id != "" {
			r.Header.Set("X-Request-Id", tc.id)
		}
		if got := edge.KeepsRequestID(r, tc.trusted); got != tc.want {
			t.Errorf("KeepsRequestID(%d bytes, trusted %v) = %v, want %v", len(tc.id), tc.trusted, got, tc.want)
		}
	}
}

func TestShapePaths(t *testing.T) {
	// A canonical path is routed as it is.
	r := httptest.NewRequest("GET", "/apps/demo/x", nil)
	w := httptest.NewRecorder()
	if ok, err := edge.Shape(w, r); !ok || err != nil {
		t.Fatalf("canonical path: ok %v, err %v", ok, err)
	}
	// One that is not is redirected to its canonical form, never rerouted.
	r = httptest.NewRequest("GET", "/apps/demo/../x?q=1", nil)
	w = httptest.NewRecorder()
	if ok, err := edge.Shape(w, r); ok || err != nil {
		t.Fatalf("dot-dot path: ok %v, err %v", ok, err)
	}
	if w.Code != http.StatusPermanentRedirect || w.Header().Get("Location") != "/apps/x?q=1" {
		t.Fatalf("dot-dot path: %d to %q", w.Code, w.Header().Get("Location"))
	}
	// One with no canonical form is refused, naming the rule, not the path.
	r = httptest.NewRequest("GET", "/apps/demo/..%2Fx", nil)
	w = httptest.NewRecorder()
	ok, err := edge.Shape(w, r)
	fe, isFault := fault.As(err)
	if ok || !isFault || fe.Code != "bad_path" || strings.Contains(fe.Message, "demo") || !strings.Contains(fe.Message, "dot segment") {
		t.Fatalf("dot segment behind an encoded slash: ok %v, err %v", ok, err)
	}
	// An encoded slash passes, encoded, for the routes to decide
	// (route/serve.go); its lower-case form is redirected first.
	r = httptest.NewRequest("GET", "/apps/demo/a%2Fb", nil)
	w = httptest.NewRecorder()
	if ok, err := edge.Shape(w, r); !ok || err != nil || r.URL.RawPath != "/apps/demo/a%2Fb" || !edge.HasEncodedSlash(r.URL.RawPath) {
		t.Fatalf("encoded slash: ok %v, err %v, raw path %q", ok, err, r.URL.RawPath)
	}
	r = httptest.NewRequest("GET", "/apps/demo/a%2fb", nil)
	w = httptest.NewRecorder()
	if ok, err := edge.Shape(w, r); ok || err != nil || w.Code != http.StatusPermanentRedirect || w.Header().Get("Location") != "/apps/demo/a%2Fb" {
		t.Fatalf("lower-case encoded slash: ok %v, err %v, %d to %q", ok, err, w.Code, w.Header().Get("Location"))
	}
}
