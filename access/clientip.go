package access

import (
	"net"
	"net/http"
	"strings"
)

// ClientIP resolves the real client address of a request: the socket
// peer, unless the peer is a trusted proxy, in which case the configured
// client-IP header (Fly-Client-Ip, CF-Connecting-Ip) or else the rightmost
// X-Forwarded-For entry that is not itself a trusted proxy.
type ClientIP struct {
	// Trusted reports whether an address is a trusted proxy; nil trusts
	// nobody.
	Trusted func(net.IP) bool
	// Header is the client-IP header honoured from trusted proxies ("" for
	// none).
	Header string
}

// Of returns r's client address as a string (the RemoteAddr as is when it
// is not host:port).
func (c ClientIP) Of(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	peer := net.ParseIP(host)
	if peer == nil || !c.trusted(peer) {
		return host
	}
	if c.Header != "" {
		if ip := net.ParseIP(strings.TrimSpace(r.Header.Get(c.Header))); ip != nil {
			return ip.String()
		}
	}
	xff := r.Header.Values("X-Forwarded-For")
	client := host
	for i := len(xff) - 1; i >= 0; i-- {
		parts := strings.Split(xff[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			ip := net.ParseIP(strings.TrimSpace(parts[j]))
			if ip == nil {
				return client // a garbled entry: trust nothing left of it
			}
			client = ip.String()
			if !c.trusted(ip) {
				return client
			}
		}
	}
	return client
}

func (c ClientIP) trusted(ip net.IP) bool { return c.Trusted != nil && c.Trusted(ip) }
