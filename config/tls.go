package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/tlsfront"
)

// TLSConfig configures the TLS front door (package tlsfront). With a mode
// other than "off", listen is the HTTPS listener (default ":443") and
// http_listen answers ACME HTTP-01 challenges and redirects to HTTPS.
type TLSConfig struct {
	// Mode is "off" (default: plain HTTP on listen, as behind an edge that
	// terminates TLS), "files" (CertFile and KeyFile, reloaded on change),
	// "internal" (a local CA in data_dir for development; `wakegate tls
	// root` prints its root), "acme" (Names from an ACME CA) or
	// "on_demand" (a certificate at the first handshake for a name the
	// decision allows). Empty means the default.
	Mode string `yaml:"mode"`
	// HTTPListen is the plain-HTTP listener's address: ACME HTTP-01
	// challenges, and a redirect to HTTPS for everything else. Default
	// ":80" (when unset, with TLS on), which needs root or the capability
	// CAP_NET_BIND_SERVICE, like the default listen ":443"; an empty
	// string turns it off.
	HTTPListen string `yaml:"http_listen"`
	// Names are the host names to obtain certificates for (acme;
	// internal, where the default is ["localhost"]). Default none.
	Names []string `yaml:"names"`
	// CertFile and KeyFile are PEM files (files mode; required there).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// CA is the ACME directory URL. Default Let's Encrypt's production
	// directory; empty means the default. Setting tls.mode to acme or
	// on_demand accepts the CA's subscriber agreement for the account.
	CA string `yaml:"ca"`
	// Email is the ACME account's contact address. Default none.
	Email string `yaml:"email"`
	// Challenges are the ACME challenge types offered: "http-01" (on
	// http_listen) and "tls-alpn-01" (on listen). Default both.
	Challenges []string `yaml:"challenges"`
	// TrustedRoots are PEM files of extra roots trusted for the CA's own
	// HTTPS (a private or test CA). Default none: the system's roots.
	TrustedRoots []string `yaml:"trusted_roots"`
	// EAB is the external account binding some CAs require. Default none.
	EAB EABConfig `yaml:"eab"`
	// HandshakeTimeout bounds a TLS handshake, an on-demand issuance
	// included. Default 30s; zero means the default.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// KeyExchange picks the key exchanges a handshake may use: "hybrid"
	// (X25519MLKEM768, post-quantum, preferred; then X25519 and P-256 for
	// clients without it) or "classical" (X25519 and P-256 only: a
	// handshake costs about a third less CPU, but traffic recorded today
	// is no longer protected against a future quantum computer).
	// Default: hybrid.
	KeyExchange string `yaml:"key_exchange"`
	// HSTS configures Strict-Transport-Security on HTTPS answers.
	HSTS HSTSConfig `yaml:"hsts"`
	// OnDemand configures the on_demand decision.
	OnDemand OnDemandConfig `yaml:"on_demand"`
	// HTTP2 sets the HTTP/2 limits of the HTTPS listener.
	HTTP2 HTTP2Limits `yaml:"http2"`
	// Storage holds certificates, keys and ACME accounts; it is set by
	// code, never by the file (the fleet passes its shared store). Default
	// (nil): files under data_dir/certificates.
	Storage certmagic.Storage `yaml:"-"`

	roots *x509.CertPool
}

// EABConfig is an ACME external account binding.
type EABConfig struct {
	// KeyID is the key identifier the CA gave. Default none.
	KeyID string `yaml:"key_id"`
	// MACKey is the HMAC key: a secret reference "env:NAME" or
	// "file:PATH". Required with KeyID.
	MACKey string `yaml:"mac_key"`

	mac string
}

// HSTSConfig configures Strict-Transport-Security.
type HSTSConfig struct {
	// MaxAge is the max-age sent. Default 0s: no header.
	MaxAge time.Duration `yaml:"max_age"`
	// IncludeSubdomains adds includeSubDomains. Default false.
	IncludeSubdomains bool `yaml:"include_subdomains"`
	// Preload adds preload. Default false.
	Preload bool `yaml:"preload"`
}

// OnDemandConfig configures the on_demand mode's decision: a name gets a
// certificate when it maps to a registered app or home under
// hosts.apps_domain or hosts.nodes_domain, or is in Allow.
type OnDemandConfig struct {
	// Allow are host names always allowed. Default none.
	Allow []string `yaml:"allow"`
	// IssuePerMinute caps new names allowed per minute (the burst is the
	// same number). Default 30; zero means the default.
	IssuePerMinute int `yaml:"issue_per_minute"`
	// CacheSize bounds the cached decisions. Default 10000; zero means
	// the default.
	CacheSize int `yaml:"cache_size"`
	// CacheTTL is how long a decision is cached. Default 1m; zero means
	// the default.
	CacheTTL time.Duration `yaml:"cache_ttl"`
}

// HTTP2Limits are the HTTPS listener's HTTP/2 limits. The header list
// size is server.max_header_bytes.
type HTTP2Limits struct {
	// MaxConcurrentStreams caps open streams per connection. Default 250;
	// zero means the default.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxResetsPerSecond is how many streams per connection a client may
	// cancel per second, on average, before the connection is closed (a
	// rapid-reset flood), with a burst of ten times as many. Default 100;
	// zero means the default.
	MaxResetsPerSecond int `yaml:"max_resets_per_second"`
}

// HostsConfig configures host routing: {slug}.{apps_domain} reaches an
// app and {target}.{nodes_domain} a home, with no prefix to strip. Each
// host is an origin of its own, which is how homes of different owners
// are kept apart in browsers (docs/security.md).
type HostsConfig struct {
	// AppsDomain is the parent domain of app hosts. Default none (off).
	AppsDomain string `yaml:"apps_domain"`
	// NodesDomain is the parent domain of home hosts: each home gets the
	// origin {target}.{nodes_domain}. Without it every home shares the
	// gateway's one origin (path routing), and check-config and status
	// warn when homes of several owners do. Default none (off).
	NodesDomain string `yaml:"nodes_domain"`
}

// letsEncrypt is the default ACME directory.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// On reports whether TLS is on.
func (t *TLSConfig) On() bool { return t.Mode != string(tlsfront.Off) }

func (t *TLSConfig) validate(k checker, hosts HostsConfig) {
	k.oneOf("mode", t.Mode, "off", "files", "internal", "acme", "on_demand")
	k.oneOf("key_exchange", t.KeyExchange, "hybrid", "classical")
	if t.HTTPListen != "" {
		k.hostPort("http_listen", t.HTTPListen, "host:port or an empty string (off)")
	}
	k.nonNegative(namedDuration{"handshake_timeout", t.HandshakeTimeout}, namedDuration{"hsts.max_age", t.HSTS.MaxAge},
		namedDuration{"on_demand.cache_ttl", t.OnDemand.CacheTTL})
	for i, n := range t.Names {
		switch {
		case strings.HasPrefix(n, "*.") && tlsfront.ValidHostName(n[2:]):
			k.bad(fmt.Sprintf("names[%d]", i), "%q: wildcard names are not issued; list each host name "+
				"(such as files.%s), or, with an ACME CA, use mode on_demand, which gets one for each app "+
				"and home at its first handshake", n, n[2:])
		case !tlsfront.ValidHostName(n):
			k.bad(fmt.Sprintf("names[%d]", i), "want a host name, got %q", n)
		}
	}
	for i, c := range t.Challenges {
		k.in(fmt.Sprintf("challenges[%d]", i)).oneOf("", c, "http-01", "tls-alpn-01")
	}
	if (t.Mode == "acme" || t.Mode == "on_demand") && len(t.Challenges) == 0 {
		k.bad("challenges", "at least one challenge type is needed")
	}
	for i, n := range t.OnDemand.Allow {
		if !tlsfront.ValidHostName(n) {
			k.bad(fmt.Sprintf("on_demand.allow[%d]", i), "want a host name, got %q", n)
		}
	}
	switch tlsfront.Mode(t.Mode) {
	case tlsfront.Files:
		for _, f := range []struct{ field, path string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
			if f.path == "" {
				k.bad(f.field, "required in files mode")
			} else if _, err := os.Stat(f.path); err != nil {
				k.bad(f.field, "%v", err)
			}
		}
	case tlsfront.ACME:
		if len(t.Names) == 0 {
			k.bad("names", "acme mode needs at least one name")
		}
	case tlsfront.OnDemand:
		if hosts.AppsDomain == "" && hosts.NodesDomain == "" && len(t.OnDemand.Allow) == 0 {
			k.bad("mode", "on_demand needs hosts.apps_domain, hosts.nodes_domain or tls.on_demand.allow to decide which names get a certificate")
		}
	}
	if t.OnDemand.IssuePerMinute < 1 || t.OnDemand.CacheSize < 1 || t.HTTP2.MaxConcurrentStreams < 1 || t.HTTP2.MaxResetsPerSecond < 1 {
		k.bad("", "on_demand.issue_per_minute, on_demand.cache_size, http2.max_concurrent_streams and http2.max_resets_per_second must be at least 1")
	}
	t.validateACME(k)
}

// validateACME checks the CA's settings and resolves the roots and the
// EAB key.
func (t *TLSConfig) validateACME(k checker) {
	if !strings.HasPrefix(t.CA, "https://") && !strings.HasPrefix(t.CA, "http://") {
		k.bad("ca", "want an ACME directory URL, got %q", t.CA)
	}
	t.roots = nil
	if len(t.TrustedRoots) > 0 {
		t.roots = x509.NewCertPool()
	}
	for i, p := range t.TrustedRoots {
		pem, err := os.ReadFile(p)
		if err != nil || !t.roots.AppendCertsFromPEM(pem) {
			k.bad(fmt.Sprintf("trusted_roots[%d]", i), "want a readable PEM certificate file, got %q", p)
		}
	}
	if (t.EAB.KeyID == "") != (t.EAB.MACKey == "") {
		k.bad("eab", "key_id and mac_key go together")
	}
	if t.EAB.MACKey != "" {
		mac, err := provconf.ResolveSecret(t.EAB.MACKey)
		if err != nil {
			k.bad("eab.mac_key", "%v", err)
		}
		t.EAB.mac = mac
	}
}

func (h *HostsConfig) validate(k checker) {
	for _, d := range []struct{ field, v string }{{"apps_domain", h.AppsDomain}, {"nodes_domain", h.NodesDomain}} {
		if d.v != "" && (!tlsfront.ValidHostName(d.v) || net.ParseIP(d.v) != nil) {
			k.bad(d.field, "want a domain name such as apps.example.com, got %q", d.v)
		}
	}
	if h.AppsDomain != "" && strings.EqualFold(h.AppsDomain, h.NodesDomain) {
		k.bad("nodes_domain", "must differ from apps_domain")
	}
}
