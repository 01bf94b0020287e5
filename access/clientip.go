package access

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP resolves the real client address of a request: the socket
// peer, unless the peer is a trusted proxy, in which case the configured
// client-IP header (Fly-Client-Ip, CF-Connecting-Ip) or else the rightmost
// X-Forwarded-For entry that is not itself a trusted proxy. It is the one
// resolver behind every per-client decision: rate limits, the per-client
// connection cap and the client named in logs.
type ClientIP struct {
	// Trusted reports whether an address (never an IPv4-mapped IPv6
	// one) is a trusted proxy; nil trusts nobody.
	Trusted func(netip.Addr) bool
	// Header is the client-IP header honoured from trusted proxies ("" for
	// none).
	Header string
}

// Of returns r's client address as a string (the RemoteAddr as is when it
// is not host:port).
func (c ClientIP) Of(r *http.Request) string {
	if c.Trusted == nil {
		// The client is the peer. A host without a colon is no IPv6
		// address: either an IPv4 one, whose text is its address's
		// (peerText), or no address at all, named as is below too.
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && strings.IndexByte(host, ':') < 0 {
			return host
		}
	}
	if a := c.Addr(r); a.IsValid() {
		if host, ok := peerText(r.RemoteAddr, a); ok {
			return host // no new string for a client that is its own peer
		}
		return a.String()
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Addr returns r's client address, invalid when the peer is not an IP
// address (a Unix socket, a test's made-up RemoteAddr).
func (c ClientIP) Addr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	peer := ap.Addr().Unmap()
	if !c.TrustedAddr(peer) {
		return peer
	}
	if c.Header != "" {
		if ip, err := netip.ParseAddr(strings.TrimSpace(r.Header.Get(c.Header))); err == nil {
			return ip.Unmap()
		}
	}
	client := peer
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		rest := xff[i]
		for rest != "" {
			hop := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			ip, err := netip.ParseAddr(strings.TrimSpace(hop))
			if err != nil {
				return client // a garbled entry: trust nothing left of it
			}
			client = ip.Unmap()
			if !c.TrustedAddr(client) {
				return client
			}
		}
	}
	return client
}

// TrustedAddr reports whether ip is a trusted proxy.
func (c ClientIP) TrustedAddr(ip netip.Addr) bool {
	return c.Trusted != nil && c.Trusted(ip)
}

// peerText returns the host part of remote, a host:port peer address,
// when it is the IPv4 address a: then it is already a's text (an IPv4
// address parses only in its one dotted-decimal form), and a request's
// client costs no new string.
func peerText(remote string, a netip.Addr) (string, bool) {
	i := strings.LastIndexByte(remote, ':')
	if !a.Is4() || i < 0 {
		return "", false
	}
	host := remote[:i]
	h, err := netip.ParseAddr(host)
	return host, err == nil && h == a
}
