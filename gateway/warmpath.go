package gateway

import (
	"net/http"
	"net/netip"
	"strconv"
)

// What a warm request needs beyond net/http and the proxy is made without
// allocations of its own where it can be: its route and its request id's
// header value live in the recorder (one allocation per request for all
// three), and the functions a forward to a home hands the proxy are made
// once per home.

// setRequestID gives r a new request id, in the X-Request-Id header value
// that rw holds.
func (g *Gateway) setRequestID(r *http.Request, rw *recorder) {
	var b [48]byte
	id := strconv.AppendUint(append(b[:0], g.reqPre...), g.reqSeq.Add(1), 36)
	rw.reqID[0] = string(id)
	r.Header["X-Request-Id"] = rw.reqID[:1:1]
}

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
