package access

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Config is the access section: named policies, which route uses which,
// and the default for every route no rule names.
type Config struct {
	// Default is the policy of every home and app that no rule below
	// names: "public", "deny" or a name from Policies. Default (when
	// empty) "public" if Policies is empty, else required: a config that
	// declares policies must say what a new route gets.
	Default string `yaml:"default"`
	// Policies are the named policies. Default none. The names "public"
	// and "deny" are built in.
	Policies []PolicyConfig `yaml:"policies"`
	// Homes give homes, by target, a policy and an owner. Default none.
	Homes []HomeRule `yaml:"homes"`
	// Apps give apps, by slug, a policy. Default none.
	Apps []AppRule `yaml:"apps"`
	// ClientIPHeader names a header that carries the client's address
	// (Fly-Client-Ip, CF-Connecting-Ip), honoured only on connections
	// from server.trusted_proxies. Default none: the rightmost untrusted
	// X-Forwarded-For entry from a trusted proxy, else the socket peer.
	ClientIPHeader string `yaml:"client_ip_header"`
}

// PolicyConfig is one named policy.
type PolicyConfig struct {
	// Name names the policy in rules. Required: [a-z0-9_-], not "public"
	// or "deny".
	Name string `yaml:"name"`
	// Type is "public", "deny", "jwt" or "forward_auth". Required.
	Type string `yaml:"type"`
	// JWT configures a jwt policy.
	JWT JWTConfig `yaml:"jwt"`
	// ForwardAuth configures a forward_auth policy.
	ForwardAuth ForwardAuthConfig `yaml:"forward_auth"`
}

// JWTConfig configures a jwt policy: a signed token whose claim names the
// home's target or owner.
type JWTConfig struct {
	// Secret is the HS256 shared secret (at least 32 bytes; write it as
	// ${VAR} to read it from the environment). Default none; one of Secret
	// and JWKSURL is required.
	Secret string `yaml:"secret"`
	// JWKSURL is the URL of a JSON Web Key Set for RS256 and ES256 keys,
	// fetched at start, refreshed every JWKSRefresh and when a token names
	// an unknown key. Default none.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSRefresh is the interval of JWKS refreshes, and also the least
	// time between two refreshes for unknown keys divided by 10. Default
	// 5m; zero means the default.
	JWKSRefresh time.Duration `yaml:"jwks_refresh"`
	// JWKSTimeout bounds one JWKS fetch. Default 5s; zero means the
	// default.
	JWKSTimeout time.Duration `yaml:"jwks_timeout"`
	// Algorithms are the accepted signing algorithms: HS256, RS256,
	// ES256. Default ["HS256"] with a secret, ["RS256", "ES256"] with a
	// JWKS URL.
	Algorithms []string `yaml:"algorithms"`
	// Issuer, when set, must equal the token's iss. Default none.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be in the token's aud. Default none.
	Audience string `yaml:"audience"`
	// Leeway is the clock skew allowed on exp, nbf and iat. Default 30s;
	// zero means the default.
	Leeway time.Duration `yaml:"leeway"`
	// Claim is the claim that must equal the home's target or its owner
	// (for apps in a home: that home's). Default "sub"; empty means the
	// default.
	Claim string `yaml:"claim"`
	// Cookie names a cookie that may carry the token. The gateway removes
	// it from every request it forwards, on every route whatever its
	// policy, unless ForwardToken keeps it on this policy's own routes.
	// Default none.
	Cookie string `yaml:"cookie"`
	// QueryParam names a query parameter that may carry the token (for
	// WebSocket clients that cannot set headers); it is removed before
	// forwarding. Default "token"; "-" turns it off.
	QueryParam string `yaml:"query_param"`
	// ForwardToken keeps the credential that carried the token (the
	// Authorization header or the cookie) on the forwarded request, for
	// homes that check the token themselves. Default false: the gateway's
	// credential is removed before forwarding, like the query parameter
	// (which is always removed).
	ForwardToken bool `yaml:"forward_token"`
}

// ForwardAuthConfig configures a forward_auth policy: an auth service asked
// about every request.
type ForwardAuthConfig struct {
	// URL is the auth service's endpoint. Required: http or https.
	URL string `yaml:"url"`
	// Timeout bounds the auth service's answer; past it the request is
	// refused (503). Default 2s; zero means the default.
	Timeout time.Duration `yaml:"timeout"`
	// RequestHeaders are the caller's headers sent to the auth service,
	// besides X-Forwarded-Method, -Uri, -Host, -Proto and -For. Default
	// ["Authorization", "Cookie"].
	RequestHeaders []string `yaml:"request_headers"`
	// ResponseHeaders are the auth service's response headers copied onto
	// the forwarded request on a 2xx (X-User, X-Email); a caller's own
	// headers under these names are always removed. Default none.
	ResponseHeaders []string `yaml:"response_headers"`
	// CacheTTL keeps a decision for this long by CacheKey. Default 0: no
	// cache.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// CacheKey are the request headers whose values (with the route) key
	// the cache. Default RequestHeaders.
	CacheKey []string `yaml:"cache_key"`
	// CacheSize bounds the number of cached decisions. Default 10000; zero
	// means the default.
	CacheSize int `yaml:"cache_size"`
}

// HomeRule gives a home a policy and an owner.
type HomeRule struct {
	// Target is the home's target. Required.
	Target string `yaml:"target"`
	// Policy is the policy's name. Default (when empty) access.default.
	Policy string `yaml:"policy"`
	// Owner is the user who owns the home: a jwt policy's claim may equal
	// it as well as the target. Default none.
	Owner string `yaml:"owner"`
}

// AppRule gives an app a policy.
type AppRule struct {
	// Slug is the app's slug. Required.
	Slug string `yaml:"slug"`
	// Policy is the policy's name. Required.
	Policy string `yaml:"policy"`
}

// Builtin policy names.
const (
	PolicyPublic = "public"
	PolicyDeny   = "deny"
)

// Defaults fills every unset field of c.
func (c *Config) Defaults() {
	if c.Default == "" && len(c.Policies) == 0 {
		c.Default = PolicyPublic
	}
	for i := range c.Policies {
		p := &c.Policies[i]
		j := &p.JWT
		def(&j.JWKSRefresh, 5*time.Minute)
		def(&j.JWKSTimeout, 5*time.Second)
		def(&j.Leeway, 30*time.Second)
		def(&j.Claim, "sub")
		def(&j.QueryParam, "token")
		if len(j.Algorithms) == 0 {
			if j.JWKSURL != "" {
				j.Algorithms = []string{"RS256", "ES256"}
			} else {
				j.Algorithms = []string{"HS256"}
			}
		}
		f := &p.ForwardAuth
		def(&f.Timeout, 2*time.Second)
		def(&f.CacheSize, 10000)
		if f.RequestHeaders == nil {
			f.RequestHeaders = []string{"Authorization", "Cookie"}
		}
		if f.CacheKey == nil {
			f.CacheKey = f.RequestHeaders
		}
	}
}

func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Problem is a config problem: the field (relative to the section, as
// "policies[1].jwt.secret") and what is wrong.
type Problem struct {
	Field string
	Msg   string
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Problems checks c, whose defaults are filled.
func (c *Config) Problems() []Problem {
	var ps []Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	names := map[string]bool{PolicyPublic: true, PolicyDeny: true}
	for i, p := range c.Policies {
		f := fmt.Sprintf("policies[%d]", i)
		switch {
		case !nameRE.MatchString(p.Name):
			bad(f+".name", "want 1-63 of [a-z0-9_-], got %q", p.Name)
		case names[p.Name]:
			bad(f+".name", "%q is already a policy", p.Name)
		}
		names[p.Name] = true
		switch p.Type {
		case PolicyPublic, PolicyDeny:
		case "jwt":
			p.JWT.problems(f+".jwt", bad)
		case "forward_auth":
			p.ForwardAuth.problems(f+".forward_auth", bad)
		default:
			bad(f+".type", "want public, deny, jwt or forward_auth, got %q", p.Type)
		}
	}
	if c.Default == "" {
		bad("default", "required when policies are declared: the policy of every route no rule names (public, deny or a policy's name)")
	} else if !names[c.Default] {
		bad("default", "no policy is named %q", c.Default)
	}
	for i, h := range c.Homes {
		if h.Target == "" {
			bad(fmt.Sprintf("homes[%d].target", i), "required")
		}
		if h.Policy != "" && !names[h.Policy] {
			bad(fmt.Sprintf("homes[%d].policy", i), "no policy is named %q", h.Policy)
		}
	}
	for i, a := range c.Apps {
		if a.Slug == "" {
			bad(fmt.Sprintf("apps[%d].slug", i), "required")
		}
		if !names[a.Policy] {
			bad(fmt.Sprintf("apps[%d].policy", i), "no policy is named %q", a.Policy)
		}
	}
	if c.ClientIPHeader != "" && http.CanonicalHeaderKey(c.ClientIPHeader) == "" {
		bad("client_ip_header", "want a header name, got %q", c.ClientIPHeader)
	}
	return ps
}

func (j *JWTConfig) problems(f string, bad func(string, string, ...any)) {
	switch {
	case j.Secret == "" && j.JWKSURL == "":
		bad(f+".secret", "one of secret and jwks_url is required")
	case j.Secret != "" && j.JWKSURL != "":
		bad(f+".jwks_url", "set secret or jwks_url, not both")
	case j.Secret != "" && len(j.Secret) < 32:
		bad(f+".secret", "want at least 32 bytes, got %d", len(j.Secret))
	}
	if j.JWKSURL != "" {
		if u, err := url.Parse(j.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(f+".jwks_url", "want an http or https URL, got %q", j.JWKSURL)
		}
	}
	for i, a := range j.Algorithms {
		switch {
		case a == "HS256" && j.Secret == "":
			bad(fmt.Sprintf("%s.algorithms[%d]", f, i), "HS256 needs a secret")
		case (a == "RS256" || a == "ES256") && j.JWKSURL == "":
			bad(fmt.Sprintf("%s.algorithms[%d]", f, i), "%s needs jwks_url", a)
		case a != "HS256" && a != "RS256" && a != "ES256":
			bad(fmt.Sprintf("%s.algorithms[%d]", f, i), "want HS256, RS256 or ES256, got %q", a)
		}
	}
	for _, d := range []struct {
		n string
		v time.Duration
	}{{"leeway", j.Leeway}, {"jwks_refresh", j.JWKSRefresh}, {"jwks_timeout", j.JWKSTimeout}} {
		if d.v < 0 {
			bad(f+"."+d.n, "must not be negative, got %s", d.v)
		}
	}
}

func (a *ForwardAuthConfig) problems(f string, bad func(string, string, ...any)) {
	if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad(f+".url", "want an http or https URL, got %q", a.URL)
	}
	if a.Timeout < 0 {
		bad(f+".timeout", "must not be negative, got %s", a.Timeout)
	}
	if a.CacheTTL < 0 {
		bad(f+".cache_ttl", "must not be negative, got %s", a.CacheTTL)
	}
	if a.CacheSize < 0 {
		bad(f+".cache_size", "must not be negative")
	}
	for i, h := range a.ResponseHeaders {
		if strings.TrimSpace(h) == "" {
			bad(fmt.Sprintf("%s.response_headers[%d]", f, i), "empty header name")
		}
	}
}
