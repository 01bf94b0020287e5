package gateway

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"

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

// homeHooks are what a forward to a home hands the proxy (proxy.Route's
// OnFailure and Retry): a failed forward drops the home's warm verdict,
// and a replayable one is retried once after a fresh wake.
type homeHooks struct {
	onFailure func()
	retry     func(ctx context.Context) (*url.URL, error)
}

// hooks returns h's hooks, made on its first forward.
func (g *Gateway) hooks(h *homeRoute) *homeHooks {
	if hk := h.hooks.Load(); hk != nil {
		return hk
	}
	id := h.spec.ID
	hk := &homeHooks{
		onFailure: func() { g.dropVerdict(id) },
		retry: func(ctx context.Context) (*url.URL, error) {
			ctx, cancel := context.WithTimeout(ctx, g.conf().Wake.WakeTimeout)
			defer cancel()
			return g.engine.Redo(ctx, id)
		},
	}
	if !h.hooks.CompareAndSwap(nil, hk) {
		return h.hooks.Load()
	}
	return hk
}

// homeRouteHooks is the field homeRoute keeps its hooks in.
type homeRouteHooks = atomic.Pointer[homeHooks]

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
