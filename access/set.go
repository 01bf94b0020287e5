package access

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
)

// Set holds the named policies and picks one per route. It is built once
// from a Config and only read afterwards.
type Set struct {
	policies map[string]Policy
	byType   map[string]string // policy name to its type, for metrics
	def      string
	homes    map[string]HomeRule // by target
	apps     map[string]string   // slug to policy name
	cookies  []string            // every jwt policy's cookie, sorted, no repeats
	// jwts are the jwt policies; params their query parameters, no
	// repeats (credentials.go).
	jwts   []*JWT
	params []string
	// identity are the headers the policies set, canonical, sorted, no
	// repeats.
	identity []string
}

// Chosen is the policy of one route.
type Chosen struct {
	// Name is the policy's name (a metric label: bounded by the config).
	Name string
	// Policy decides.
	Policy Policy
	// QueryParam is a query parameter that carries a token, removed
	// before forwarding ("" for none).
	QueryParam string
	// KeepCookie is the gateway cookie this route forwards (a jwt policy
	// with forward_token: its home checks the token itself); "" for none.
	KeepCookie string
}

// NewSet builds the policies of cfg (defaults filled, checked).
// clientIP resolves the caller's address for forward_auth; onError
// receives background failures (a JWKS refresh). Close stops them.
func NewSet(cfg Config, clientIP func(*http.Request) string, onError func(error)) (*Set, error) {
	s := &Set{
		policies: map[string]Policy{PolicyPublic: Public{}, PolicyDeny: Deny{}},
		byType:   map[string]string{PolicyPublic: PolicyPublic, PolicyDeny: PolicyDeny},
		def:      cfg.Default, homes: map[string]HomeRule{}, apps: map[string]string{},
	}
	for _, pc := range cfg.Policies {
		var p Policy
		switch pc.Type {
		case PolicyPublic:
			p = Public{}
		case PolicyDeny:
			p = Deny{}
		case "jwt":
			j, err := NewJWT(pc.JWT, onError)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("access policy %s: %w", pc.Name, err)
			}
			p = j
			s.jwts = append(s.jwts, j)
			if q := j.QueryParam(); q != "" && !slices.Contains(s.params, q) {
				s.params = append(s.params, q)
			}
		case "forward_auth":
			p = NewForwardAuth(pc.ForwardAuth, clientIP)
			for _, h := range pc.ForwardAuth.ResponseHeaders {
				if h = http.CanonicalHeaderKey(strings.TrimSpace(h)); !slices.Contains(s.identity, h) {
					s.identity = append(s.identity, h)
				}
			}
		default:
			s.Close()
			return nil, fmt.Errorf("access policy %s: unknown type %q", pc.Name, pc.Type)
		}
		s.policies[pc.Name] = p
		s.byType[pc.Name] = pc.Type
		if c := pc.JWT.Cookie; pc.Type == "jwt" && c != "" && !slices.Contains(s.cookies, c) {
			s.cookies = append(s.cookies, c)
		}
	}
	sort.Strings(s.cookies)
	sort.Strings(s.identity)
	for _, h := range cfg.Homes {
		s.homes[h.Target] = h
	}
	for _, a := range cfg.Apps {
		s.apps[a.Slug] = a.Policy
	}
	return s, nil
}

// Close stops every policy's background work.
func (s *Set) Close() {
	for _, p := range s.policies {
		if c, ok := p.(Closer); ok {
			c.Close()
		}
	}
}

// Owner returns the configured owner of the home at target ("" for none).
func (s *Set) Owner(target string) string { return s.homes[target].Owner }

// ForHome returns the policy of the home at target.
func (s *Set) ForHome(target string) Chosen {
	name := s.homes[target].Policy
	if name == "" {
		name = s.def
	}
	return s.chosen(name)
}

// ForApp returns the policy of the app slug.
func (s *Set) ForApp(slug string) Chosen {
	name, ok := s.apps[slug]
	if !ok {
		name = s.def
	}
	return s.chosen(name)
}

// GatewayCookies returns the names of the cookies that carry the gateway's
// own credentials (every jwt policy's cookie), sorted. They are removed
// from every forwarded request whatever the route's policy, so that a home
// never receives a visitor's credential meant for another home on the same
// origin (path routing); a route's KeepCookie is the one exception.
func (s *Set) GatewayCookies() []string { return s.cookies }

// Default returns the name of the default policy.
func (s *Set) Default() string { return s.def }

// Names returns the policy names, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.policies))
	for n := range s.policies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *Set) chosen(name string) Chosen {
	c := Chosen{Name: name, Policy: s.policies[name]}
	if c.Policy == nil { // a checked config names no missing policy
		c.Name, c.Policy = PolicyDeny, Deny{}
	}
	if j, ok := c.Policy.(*JWT); ok {
		c.QueryParam = j.QueryParam()
		if j.cfg.ForwardToken {
			c.KeepCookie = j.cfg.Cookie
		}
	}
	return c
}
