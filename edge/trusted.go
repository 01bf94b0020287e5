package edge

import (
	"net"
	"net/http"
	"net/netip"
)

// TrustedProxies are the networks of server.trusted_proxies, the one
// trusted-peer rule (DESIGN rule 22): a socket peer in one is a trusted
// proxy, whose X-Forwarded-*, client-IP header and X-Request-Id are kept;
// any other peer's are removed and the gateway's own values set. The
// request's hygiene asks it about the socket peer (Peer); the proxy's
// outbound plan (Has) and the client-address resolver (HasAddr) are
// handed its checks, so all three trust the same peers.
type TrustedProxies []*net.IPNet

// Has reports whether ip is in one of t's networks.
func (t TrustedProxies) Has(ip net.IP) bool {
	for _, n := range t {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// HasAddr is Has for an address as netip holds it; it copies the address
// on the stack, where Has's net.IP would be a new slice.
func (t TrustedProxies) HasAddr(ip netip.Addr) bool {
	if ip.Is4() {
		b := ip.As4()
		return t.Has(b[:])
	}
	b := ip.As16()
	return t.Has(b[:])
}

// Peer reports whether r's socket peer is a trusted proxy: an IP peer
// (not a Unix socket's) without a zone, in one of t's networks.
func (t TrustedProxies) Peer(r *http.Request) bool {
	if len(t) == 0 {
		return false // no address to parse on every request
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || ap.Addr().Zone() != "" {
		return false // not an IP peer; a zoned one is not trusted either
	}
	return t.HasAddr(ap.Addr())
}
