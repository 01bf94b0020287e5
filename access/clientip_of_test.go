package access

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientIPOfText checks that Of names a client by its address's own
// text, whether it comes from the peer address as is or from a header
// behind a trusted proxy: the text of Addr, or the peer's host when the
// peer is no IP address.
func TestClientIPOfText(t *testing.T) {
	lan := netip.MustParsePrefix("10.0.0.0/8")
	trusted := ClientIP{Trusted: lan.Contains, Header: "Fly-Client-Ip"}
	for _, c := range []struct {
		name   string
		ip     ClientIP
		remote string
		header map[string]string
		want   string
	}{
		{"ipv4 peer", ClientIP{}, "192.0.2.7:40000", nil, "192.0.2.7"},
		{"ipv4 peer, trust on", trusted, "192.0.2.7:1", nil, "192.0.2.7"},
		{"ipv6 peer", ClientIP{}, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"ipv6 peer, long form", ClientIP{}, "[2001:0db8:0:0:0:0:0:1]:443", nil, "2001:db8::1"},
		{"mapped ipv4 peer", ClientIP{}, "[::ffff:192.0.2.7]:80", nil, "192.0.2.7"},
		{"zoned peer", ClientIP{}, "[fe80::1%eth0]:80", nil, "fe80::1%eth0"},
		{"not an address", ClientIP{}, "pipe", nil, "pipe"},
		{"host name", ClientIP{}, "example.test:80", nil, "example.test"},
		{"trusted proxy, header", trusted, "10.1.2.3:5000", map[string]string{"Fly-Client-Ip": "198.51.100.4"}, "198.51.100.4"},
		{"trusted proxy, forwarded", trusted, "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "198.51.100.9, 10.0.0.2"}, "198.51.100.9"},
		{"trusted proxy, names nobody", trusted, "10.1.2.3:5000", nil, "10.1.2.3"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		got := c.ip.Of(r)
		if got != c.want {
			t.Errorf("%s: Of(%q) = %q, want %q", c.name, c.remote, got, c.want)
		}
		if a := c.ip.Addr(r); a.IsValid() && a.String() != got {
			t.Errorf("%s: Of(%q) = %q, but Addr is %s", c.name, c.remote, got, a)
		}
	}
}

// TestClientIPOfAllocs checks that naming a client that is its own IPv4
// peer makes no new string.
func TestClientIPOfAllocs(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.7:40000"
	var ip ClientIP
	if n := testing.AllocsPerRun(100, func() { _ = ip.Of(r) }); n != 0 {
		t.Errorf("Of allocates %v times per call; want none", n)
	}
}

// FuzzOfWithoutTrust checks Of against its definition when no proxy is
// trusted: the text of the peer's address, else the peer's host, else
// RemoteAddr as is.
func FuzzOfWithoutTrust(f *testing.F) {
	for _, s := range []string{"192.0.2.7:40000", "[2001:db8::1]:443", "[::ffff:192.0.2.7]:80",
		"[fe80::1%eth0]:80", "pipe", "example.test:80", "[1.2.3.4]:80", "1.2.3.4%x:80", "01.2.3.4:80",
		"1.2.3.4:99999", "1.2.3.4:", ":80", "[::1]:x", "1.2.3.4:80:90"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{}}
		want := remote
		if ap, err := netip.ParseAddrPort(remote); err == nil {
			want = ap.Addr().Unmap().String()
		} else if host, _, err := net.SplitHostPort(remote); err == nil {
			want = host
		}
		if got := (ClientIP{}).Of(r); got != want {
			t.Fatalf("Of(%q) = %q, want %q", remote, got, want)
		}
	})
}
