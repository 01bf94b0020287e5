package gateway

import (
	"net/netip"
)

// What a warm request needs beyond net/http and the proxy is made without
// allocations of its own where it can be: its route and its request id's
// header value live in the recorder (one allocation per request for all
// three), and the functions a forward to a home hands the proxy are made
// once per home.

// hasAddr is has for an address as netip holds it; it copies the address
// on the stack, where has's net.IP would be a new slice.
func (t trustedProxies) hasAddr(ip netip.Addr) bool {
	if ip.Is4() {
		b := ip.As4()
		return t.has(b[:])
	}
	b := ip.As16()
	return t.has(b[:])
}
