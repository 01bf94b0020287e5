package route

import (
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/edge"
)

// The app and home routes carry nearly every request, and the router
// (chi) costs each of them a copy of the request and a context for its
// route parameters. pathRoutes matches those routes by hand, before the
// router and exactly as it would: the path it routes on (the escaped one
// when the URL has one), the same methods, a non-empty {slug} or
// {target} segment. Anything else, odd or not, goes to the router, which
// still holds every route; gateway/fastroute_test.go sends a table of
// requests through both and compares the answers. A new route under
// /apps/ or /node/ must be matched here as well (and added to that
// table): these routes are served before the router would see it.

// pathRoutes serves the app and home path routes and hands every other
// request to router.
func (p *Path) pathRoutes(router http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.ServePathRoute(w, r) {
			router.ServeHTTP(w, r)
		}
	})
}

// ServePathRoute serves r when it is for /apps/{slug}, /apps/{slug}/...,
// /node/{target} or /node/{target}/..., and reports whether it did.
func (p *Path) ServePathRoute(w http.ResponseWriter, r *http.Request) bool {
	if !routerMethod(r.Method) {
		return false // the router answers 405
	}
	path := r.URL.RawPath // what the router matches on
	if path == "" {
		path = r.URL.Path
	}
	rest, app := strings.CutPrefix(path, "/apps/")
	if !app {
		var node bool
		if rest, node = strings.CutPrefix(path, "/node/"); !node {
			return false
		}
	}
	name, _, sub := strings.Cut(rest, "/")
	switch {
	case name == "":
		return false // the router answers 404
	case edge.HasEncodedSlash(name):
		p.writeError(w, r, errEncodedSlash("in the route's own name", ""))
	case !app:
		p.serveNode(w, r, name)
	case sub:
		p.serveApp(w, r, name)
	default:
		p.redirectSlash(w, r, name)
	}
	return true
}

// routerMethod reports whether the router routes method at all; it
// answers any other with 405, whatever the path.
func routerMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace, "QUERY":
		return true
	}
	return false
}
