package access

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Credentials kept to their route (DESIGN rule 31): under path routing
// every home shares the visitor's origin, so a token a jwt policy reads
// would otherwise travel to every other home the visitor opens. The
// policy's cookie is removed everywhere (GatewayCookies); its bearer token
// and query parameter are removed from requests to routes it does not
// decide (StripForeign); and a Referer never carries a query token
// (StripReferer).

// signed reports whether raw is a token of p's: its signature checks with
// p's keys. Its claims are not checked (an expired token is still a
// credential), and a key set is read as it is held, never fetched.
func (p *JWT) signed(raw string) bool {
	keys := p.keys
	if p.jwks != nil {
		keys = func(*jwt.Token) (any, error) { return p.jwks.VerificationKeySet(context.Background()) }
	}
	_, err := p.lenient.Parse(raw, keys)
	return err == nil
}

// ours reports whether raw is a token of one of s's jwt policies.
func (s *Set) ours(raw string) bool {
	for _, j := range s.jwts {
		if j.signed(raw) {
			return true
		}
	}
	return false
}

// StripForeign removes from r, bound for a route that the policy c does
// not read tokens for (public, forward_auth, deny), an Authorization:
// Bearer token and each query parameter value that one of the gateway's
// jwt policies signed. An app's own bearer token or ?token= (one no
// policy signed) is left alone. A route that a jwt policy decides has its
// credentials handled by that policy's Check.
func (s *Set) StripForeign(r *http.Request, c Chosen) {
	if len(s.jwts) == 0 {
		return
	}
	if _, ok := c.Policy.(*JWT); ok {
		return
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") &&
		s.ours(strings.TrimSpace(a[7:])) {
		delete(r.Header, "Authorization")
	}
	if q := r.URL.RawQuery; q != "" && s.mentionsParam(q) {
		if clean, changed := s.stripParams(q, true); changed {
			r.URL.RawQuery = clean
		}
	}
}

// StripReferer removes the jwt policies' query parameters from r's
// Referer (or the Referer, when it does not parse), whatever the route:
// a page opened with ?token= names it in every request it makes.
func (s *Set) StripReferer(r *http.Request) {
	if len(s.params) == 0 {
		return
	}
	refs := r.Header["Referer"]
	if len(refs) == 0 || !s.mentionsParam(refs[0]) {
		return
	}
	u, err := url.Parse(refs[0])
	if err != nil || len(refs) > 1 {
		delete(r.Header, "Referer")
		return
	}
	if clean, changed := s.stripParams(u.RawQuery, false); changed {
		u.RawQuery = clean
		r.Header["Referer"] = []string{u.String()}
	}
}

// mentionsParam reports whether s holds "name=" for one of the query
// parameters: a cheap test before the query is parsed.
func (s *Set) mentionsParam(v string) bool {
	for _, p := range s.params {
		if strings.Contains(v, p+"=") {
			return true
		}
	}
	return false
}

// stripParams removes the jwt policies' parameters from the raw query q
// (with signedOnly, only values one of the policies signed) and reports
// whether it removed any. The other parameters keep their bytes and
// order.
func (s *Set) stripParams(q string, signedOnly bool) (string, bool) {
	var b strings.Builder
	changed := false
	for part := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(part, "=")
		if name, err := url.QueryUnescape(k); err == nil && s.isParam(name) {
			if !signedOnly {
				changed = true
				continue
			}
			if val, err := url.QueryUnescape(v); err == nil && s.ours(val) {
				changed = true
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	return b.String(), changed
}

func (s *Set) isParam(name string) bool {
	for _, p := range s.params {
		if p == name {
			return true
		}
	}
	return false
}

// IdentityHeaders are the canonical names of the headers the policies set
// on forwarded requests (every forward_auth policy's response_headers),
// sorted: the access gate removes a client's own before any policy runs,
// on every route, and the proxy removes their underscore spellings
// (Protects).
func (s *Set) IdentityHeaders() []string { return s.identity }

// Protects reports whether the canonical header name n is one of
// IdentityHeaders.
func (s *Set) Protects(n string) bool {
	for _, m := range s.identity {
		if m == n {
			return true
		}
	}
	return false
}
