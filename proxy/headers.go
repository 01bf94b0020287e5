package proxy

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/wakegate/wakegate/internal/endpoint"
)

// What a home or an app receives (DESIGN rules 22 and 35) is decided here,
// once per request, for both forward paths: the direct path writes the
// plan's fields itself (direct.go), ReverseProxy's rewrite sets them
// (forward.go). docs/headers.md says it for operators.
//
//   - Host: by the route's HostPolicy rule; by default the client's, so
//     that an app that compares Origin with Host (Jupyter, code-server,
//     gorilla/websocket's default) accepts the browser's requests.
//   - X-Forwarded-For: the socket peer, after a trusted proxy's chain.
//   - X-Forwarded-Host, X-Forwarded-Proto: the client's Host and scheme,
//     or a trusted proxy's.
//   - X-Real-Ip: the client address (through trusted proxies).
//   - Forwarded: never (X-Forwarded-* say it; a client's is removed).
//   - Origin, Referer and every other field: the client's, less what the
//     access gate removed (route/access.go) and what scrub removes.

// Host rules (HostPolicy): a rule is one of these or a fixed Host value.
const (
	// HostAuto is the client's Host, except toward an https upstream,
	// which gets its own address (its TLS name and virtual host).
	HostAuto = ""
	// HostClient is the client's Host, toward every upstream.
	HostClient = "client"
	// HostUpstream is the upstream's address (host:port of its URL).
	HostUpstream = "upstream"
)

// HostPolicy says which Host forwarded requests carry: a rule per home
// (by target) and per app (by slug), else Default. A rule is HostAuto,
// HostClient, HostUpstream or a fixed value ("notebook.internal:8888").
// A request without a Host of its own (HTTP/1.0) gets the upstream's.
type HostPolicy struct {
	// Default is the rule of every route the maps do not name.
	Default string
	// Homes are the rules of /node/{target} routes, by target.
	Homes map[string]string
	// Apps are the rules of /apps/{slug} routes, by slug.
	Apps map[string]string
}

// rule is the Host rule of route.
func (hp *HostPolicy) rule(route *Route) string {
	m := hp.Apps
	if route.Kind == "node" {
		m = hp.Homes
	}
	if len(m) > 0 {
		if r, ok := m[route.Name]; ok {
			return r
		}
	}
	return hp.Default
}

// outHead is a request's outbound header plan: the fields the gateway
// sets itself. Values are as they go on the wire.
type outHead struct {
	// host is the outbound Host; inHost the client's (r.Host), from
	// which a retry toward another upstream makes it again.
	host, inHost string
	// xff is X-Forwarded-For ("" for none: the peer's address did not
	// parse); xfHost and xfProto are X-Forwarded-Host and -Proto.
	xff, xfHost, xfProto string
	// realIP is X-Real-Ip.
	realIP string
	// trusted is whether the socket peer is a trusted proxy.
	trusted bool
}

// plan fills route's outbound header plan for r.
func (p *Proxy) plan(r *http.Request, route *Route) {
	h := &route.out
	h.trusted = p.trustedPeer(r)
	h.inHost = r.Host
	h.host = p.outHost(route, route.Upstream)
	h.xff = ""
	if peer, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header["X-Forwarded-For"]; h.trusted && len(prior) > 0 {
			// A trusted proxy's chain is kept and extended.
			peer = strings.Join(prior, ", ") + ", " + peer
		}
		h.xff = peer
	}
	h.xfHost, h.xfProto = r.Host, "http"
	if r.TLS != nil {
		h.xfProto = "https"
	}
	if h.trusted {
		if v := r.Header.Get("X-Forwarded-Host"); v != "" {
			h.xfHost = v
		}
		if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
			h.xfProto = v
		}
	}
	h.realIP = p.clientIP(r)
	if !plainText(h.realIP) {
		h.realIP = newlineToSpace.Replace(h.realIP) // as Header.Write cleans a value
	}
}

// outHost is the Host of route's request toward upstream u by the
// route's rule.
func (p *Proxy) outHost(route *Route, u *url.URL) string {
	switch rule := p.opts.Host.rule(route); rule {
	case HostAuto:
		if u.Scheme == "https" {
			break
		}
		fallthrough
	case HostClient:
		if h := route.out.inHost; h != "" {
			return h
		}
	case HostUpstream:
	default:
		return rule
	}
	return endpoint.HostHeader(u.Host)
}

// identityHeaders name the client's address or the original request
// (besides X-Forwarded-*); they are kept only from trusted proxies (DESIGN
// rule 22).
var identityHeaders = map[string]bool{"X-Real-Ip": true, "True-Client-Ip": true, "Cf-Connecting-Ip": true,
	"Fly-Client-Ip": true, "X-Client-Ip": true, "X-Original-Forwarded-For": true, "Forwarded": true,
	"X-Original-Url": true, "X-Rewrite-Url": true, "X-Cluster-Client-Ip": true}

// scrub removes from an outbound request's headers h the identity
// headers when the peer is untrusted, and always the underscore spellings
// of identity and gateway headers and of the headers a policy sets
// (X_Forwarded_For, X_Wakegate_Relay, X_User), which servers that map "_"
// to "-" (CGI, WSGI, some frameworks) would read as the real ones.
func (p *Proxy) scrub(h http.Header, untrusted bool) {
	for k := range h {
		if p.scrubbed(k, untrusted) {
			delete(h, k)
		}
	}
}

// scrubbed reports whether scrub removes the field named k.
func (p *Proxy) scrubbed(k string, untrusted bool) bool {
	if strings.IndexByte(k, '_') < 0 {
		return untrusted && (identityHeaders[k] || strings.HasPrefix(k, "X-Forwarded-"))
	}
	// A rare name: it may cost an allocation.
	n := http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))
	return identityHeaders[n] || strings.HasPrefix(n, "X-Forwarded-") || p.isStripped(n) ||
		(p.opts.Protected != nil && p.opts.Protected(n))
}

// isStripped reports whether canonical header name n is one of the
// headers removed from every request.
func (p *Proxy) isStripped(n string) bool {
	for _, s := range p.stripped {
		if s == n {
			return true
		}
	}
	return false
}
