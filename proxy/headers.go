package proxy

import (
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// What a home or an app receives (DESIGN rules 22 and 35) is decided here,
// once per request, for both forward paths (outHead): the direct path
// writes the plan as bytes (direct.go), ReverseProxy's rewrite applies it
// to the outbound header map (forward.go). docs/headers.md says it for
// operators.
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
//     access gate removed (route/access.go) and what the plan leaves out
//     (forwards).

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
func (hp *HostPolicy) rule(route *forwarding) string {
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
// sets itself, computed once in Serve (plan) for whichever path forwards
// the request. Values are trimmed, as they go on the wire. The
// header-map writer (apply, in ReverseProxy's Rewrite) and the byte
// writer (the direct path's head) both take the fields from here, and
// both leave out the same inbound fields (replaced).
type outHead struct {
	// host is the outbound Host; inHost the client's (r.Host), from
	// which a retry toward another upstream makes it again.
	host, inHost string
	// trusted is whether the socket peer is a trusted proxy.
	trusted bool
	// vals are the fields the gateway sets, by slot (planField), in the
	// order the byte writer writes them; has marks the slots set. apply
	// hands out one-element slices of vals, so the header map costs no
	// slice of its own.
	vals [planFields]string
	has  uint8
}

// planField is a slot of the plan: Te, the relay token, X-Forwarded-For
// (none when the peer's address did not parse), X-Forwarded-Host and
// -Proto, X-Real-Ip, X-Request-Id (when the request has one).
type planField uint8

const (
	fieldTe planField = iota
	fieldRelay
	fieldXFF
	fieldXFHost
	fieldXFProto
	fieldRealIP
	fieldRequestID
	planFields
)

// planNames are the fields' names by slot; the relay header's is the
// proxy's (Options.RelayHeader).
var planNames = [planFields]string{fieldTe: "Te", fieldXFF: "X-Forwarded-For", fieldXFHost: "X-Forwarded-Host",
	fieldXFProto: "X-Forwarded-Proto", fieldRealIP: "X-Real-Ip", fieldRequestID: "X-Request-Id"}

// set sets the slot f to the value v.
func (h *outHead) set(f planField, v string) {
	h.vals[f] = textproto.TrimString(v)
	h.has |= 1 << f
}

// sets reports whether the plan sets the slot f.
func (h *outHead) sets(f planField) bool { return h.has&(1<<f) != 0 }

// name is the field name of slot f.
func (p *Proxy) name(f planField) string {
	if f == fieldRelay {
		return p.stripped[0]
	}
	return planNames[f]
}

// plan fills route's outbound header plan for r.
func (p *Proxy) plan(r *http.Request, route *forwarding) {
	h := &route.out
	h.inHost = r.Host
	h.host = p.outHost(route, route.Upstream)
	h.has = 0
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		h.set(fieldTe, "trailers") // the upstream may send trailers: the gateway passes them on
	}
	if route.RelayToken != "" {
		h.set(fieldRelay, route.RelayToken)
	}
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	h.trusted = err == nil && p.trusts(peer)
	if err == nil {
		if prior := r.Header["X-Forwarded-For"]; h.trusted && len(prior) > 0 {
			// A trusted proxy's chain is kept and extended.
			peer = strings.Join(prior, ", ") + ", " + peer
		}
		h.set(fieldXFF, peer)
	}
	xfHost, xfProto := r.Host, "http"
	if r.TLS != nil {
		xfProto = "https"
	}
	if h.trusted {
		if v := r.Header.Get("X-Forwarded-Host"); v != "" {
			xfHost = v
		}
		if v := r.Header.Get("X-Forwarded-Proto"); v != "" {
			xfProto = v
		}
	}
	h.set(fieldXFHost, xfHost)
	h.set(fieldXFProto, xfProto)
	realIP := p.clientIP(r)
	if !h1client.PlainText(realIP) {
		realIP = newlineToSpace.Replace(realIP) // as Header.Write cleans a value
	}
	h.set(fieldRealIP, realIP)
	if id := r.Header.Get("X-Request-Id"); id != "" {
		h.set(fieldRequestID, id)
	}
}

// trusts reports whether the socket peer at host (its address) is a
// trusted proxy, by Options.Trusted; a peer that is no IP (a zoned
// address, a Unix socket's) is not.
func (p *Proxy) trusts(host string) bool {
	if p.opts.Trusted == nil {
		return false // no address to parse on every request
	}
	ip := net.ParseIP(host)
	return ip != nil && p.opts.Trusted(ip)
}

// replaced reports whether the inbound field k (canonical) is left out
// of the outbound request because the plan owns it: a client's
// Forwarded and X-Forwarded-* never go on (ReverseProxy removes them
// before Rewrite too), and the plan's own fields take the place of the
// client's. Hop-by-hop fields are each writer's own to leave out.
func (h *outHead) replaced(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Te":
		return true
	case "X-Request-Id":
		return h.sets(fieldRequestID) // else the client's goes as it is
	}
	return false
}

// forwards reports whether the plan lets the inbound field k (canonical)
// through: not replaced by the plan's own, not removed from every
// request (the relay header, the probe header, the caller's gateway
// credentials) and not scrubbed.
func (p *Proxy) forwards(h *outHead, k string) bool {
	return !h.replaced(k) && !p.isStripped(k) && !p.scrubbed(k, !h.trusted)
}

// apply makes the outbound header map out follow the plan h: the fields
// it does not forward removed, its own set. This is the header-map
// writer (ReverseProxy's Rewrite); the direct path writes the same plan
// as bytes (directReq.start).
func (p *Proxy) apply(h *outHead, out http.Header) {
	for k := range out {
		if !p.forwards(h, k) {
			delete(out, k)
		}
	}
	for f := range planFields {
		if h.sets(f) {
			out[p.name(f)] = h.vals[f : f+1 : f+1]
		}
	}
}

// outHost is the Host of route's request toward upstream u by the
// route's rule.
func (p *Proxy) outHost(route *forwarding, u *url.URL) string {
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

// scrubbed reports whether the inbound field k is scrubbed from the
// outbound request: an identity header when the peer is untrusted, and
// always the underscore spellings of identity and gateway headers and of
// the headers a policy sets (X_Forwarded_For, X_Wakegate_Relay, X_User),
// which servers that map "_" to "-" (CGI, WSGI, some frameworks) would
// read as the real ones.
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
