package access

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestConfigProblems(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // a field with a problem, "" for none
	}{
		{"empty is public", Config{}, ""},
		{"policies need a default", Config{Policies: []PolicyConfig{{Name: "p", Type: "deny"}}}, "default"},
		{"unknown default", Config{Default: "nope"}, "default"},
		{"unknown type", Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "magic"}}}, "policies[0].type"},
		{"builtin name", Config{Default: "public", Policies: []PolicyConfig{{Name: "deny", Type: "deny"}}}, "policies[0].name"},
		{"short secret", Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "jwt", JWT: JWTConfig{Secret: "short"}}}}, "policies[0].jwt.secret"},
		{"no key", Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "jwt"}}}, "policies[0].jwt.secret"},
		{"RS256 without JWKS", Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "jwt",
			JWT: JWTConfig{Secret: strings.Repeat("x", 32), Algorithms: []string{"RS256"}}}}}, "policies[0].jwt.algorithms[0]"},
		{"forward_auth url", Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "forward_auth",
			ForwardAuth: ForwardAuthConfig{URL: "ftp://x"}}}}, "policies[0].forward_auth.url"},
		{"home rule names no policy", Config{Homes: []HomeRule{{Target: "a", Policy: "x"}}}, "homes[0].policy"},
		{"app rule names no policy", Config{Apps: []AppRule{{Slug: "a"}}}, "apps[0].policy"},
	}
	for _, c := range cases {
		c.cfg.Defaults()
		ps := c.cfg.Problems()
		switch {
		case c.want == "" && len(ps) > 0:
			t.Errorf("%s: problems %v; want none", c.name, ps)
		case c.want != "" && (len(ps) == 0 || ps[0].Field != c.want):
			t.Errorf("%s: problems %v; want one at %s", c.name, ps, c.want)
		}
	}
}

func TestClientIP(t *testing.T) {
	lan := netip.MustParsePrefix("10.0.0.0/8")
	ip := ClientIP{Trusted: lan.Contains}
	withHeader := ClientIP{Trusted: lan.Contains, Header: "Fly-Client-Ip"}
	cases := []struct {
		name   string
		c      ClientIP
		remote string
		hdr    map[string]string
		want   string
	}{
		{"untrusted peer, forged headers", ip, "203.0.113.1:5", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "203.0.113.1"},
		{"untrusted peer, forged client header", withHeader, "203.0.113.1:5", map[string]string{"Fly-Client-Ip": "1.2.3.4"}, "203.0.113.1"},
		{"trusted peer, client header", withHeader, "10.0.0.1:5", map[string]string{"Fly-Client-Ip": "198.51.100.2"}, "198.51.100.2"},
		{"trusted peer, rightmost untrusted", ip, "10.0.0.1:5", map[string]string{"X-Forwarded-For": "1.2.3.4, 198.51.100.2, 10.0.0.9"}, "198.51.100.2"},
		{"trusted peer, garbled entry", ip, "10.0.0.1:5", map[string]string{"X-Forwarded-For": "1.2.3.4, junk, 10.0.0.9"}, "10.0.0.9"},
		{"trusted peer, no header", ip, "10.0.0.1:5", nil, "10.0.0.1"},
		{"trusted peer, all hops trusted", ip, "10.0.0.1:5", map[string]string{"X-Forwarded-For": "10.0.0.7, 10.0.0.9"}, "10.0.0.7"},
		{"trusted peer, mapped v4 hop", ip, "10.0.0.1:5", map[string]string{"X-Forwarded-For": "::ffff:203.0.113.9"}, "203.0.113.9"},
		{"trusted peer, header wins over the chain", withHeader, "10.0.0.1:5", map[string]string{"Fly-Client-Ip": "198.51.100.7", "X-Forwarded-For": "203.0.113.1"}, "198.51.100.7"},
		{"not an IP peer", ip, "@unix", nil, "@unix"},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		if got := c.c.Of(r); got != c.want {
			t.Errorf("%s: %s; want %s", c.name, got, c.want)
		}
	}
}

func TestLimits(t *testing.T) {
	cfg := LimitsConfig{ClientRate: 0.001, ClientBurst: 2, WakeRate: 0.001, MaxWaitingPerHome: 2, MaxHolds: 1, MaxClients: 3}
	cfg.Defaults()
	l := NewLimits(cfg)
	for range 2 {
		if l.Client("a") != 0 {
			t.Fatal("burst refused")
		}
	}
	if d := l.Client("a"); d <= 0 || d > 2000*time.Second {
		t.Fatalf("third request: wait %s; want a positive wait", d)
	}
	for _, c := range []string{"b", "c", "d", "e"} {
		l.Client(c)
	}
	if c, _, _ := l.Sizes(); c != 3 {
		t.Fatalf("client table holds %d; want 3 (max_clients)", c)
	}
	for range cfg.WakeBurst {
		if l.Wake("h") != 0 {
			t.Fatal("wake burst refused")
		}
	}
	if l.Wake("h") <= 0 {
		t.Fatal("wake past the burst allowed")
	}
	d1, ok1 := l.Wait("h")
	_, ok2 := l.Wait("h")
	if _, ok := l.Wait("h"); !ok1 || !ok2 || ok {
		t.Fatal("waiting cap not enforced at 2")
	}
	d1()
	if _, ok := l.Wait("h"); !ok {
		t.Fatal("a freed waiting slot is not reusable")
	}
	release, ok := l.Hold()
	if _, again := l.Hold(); !ok || again {
		t.Fatal("hold cap not enforced at 1")
	}
	release()
	if _, ok := l.Hold(); !ok {
		t.Fatal("a freed hold is not reusable")
	}
}
