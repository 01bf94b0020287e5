package gateway

import (
	"context"
	"github.com/wakegate/wakegate/route"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"

	"github.com/wakegate/wakegate/proxy"
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

// newRoute returns the route of the request served through w: the one the
// recorder holds when hygiene wrapped w, else a new one. A request makes
// one route.
func newRoute(w http.ResponseWriter, kind, name string) *proxy.Route {
	var route *proxy.Route
	if rw, ok := w.(*recorder); ok {
		route = &rw.route
	} else {
		route = &proxy.Route{}
	}
	route.Kind, route.Name = kind, name
	return route
}

// hooks returns h's hooks, made on its first forward: a failed forward
// drops the home's warm verdict, and a replayable one is retried once
// after a fresh wake.
func (g *Gateway) hooks(h *route.Home) *route.Hooks {
	return h.HooksOr(func() *route.Hooks {
		id := h.ID()
		return &route.Hooks{
			OnFailure: func() { g.dropVerdict(id) },
			Retry: func(ctx context.Context) (*url.URL, error) {
				ctx, cancel := context.WithTimeout(ctx, g.conf().Wake.WakeTimeout)
				defer cancel()
				return g.engine.Redo(ctx, id)
			},
		}
	})
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
