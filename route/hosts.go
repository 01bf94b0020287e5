package route

import (
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/edge"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/tlsfront"
)

// Host routing (hosts.apps_domain, hosts.nodes_domain). A request whose
// Host is {slug}.{apps_domain} is the app's, whatever its path: the app
// sees the path as the client sent it, with no /apps/{slug} prefix (the
// app's own base path and strip_prefix apply as for path routes). A
// request for {target}.{nodes_domain} is the home's: the home sees the
// path under /node/{target}, as for path routes, so a home serves both
// the same way. Paths under /_wakegate/ stay the gateway's own on every
// host (the waiting page's poll, a home's ready signal). A host under
// either domain that names no registered app or home gets 404; any other
// host is served by the path routes.

// wakegatePrefix is the gateway's own path space, on every host.
const wakegatePrefix = "/_wakegate/"

// hostDomains are hosts.apps_domain and hosts.nodes_domain ("": off).
type hostDomains struct{ apps, nodes string }

// ByHost sends requests for host-routed names to their app or home, and
// every other request to next (the path routes).
func (p *Path) ByHost(next http.Handler) http.Handler {
	apps, nodes := p.hosts.apps, p.hosts.nodes
	if apps == "" && nodes == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, ok := tlsfront.RequestHost(r.Host)
		if !ok || strings.HasPrefix(r.URL.Path, wakegatePrefix) {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case underDomain(host, apps):
			slug, _ := HostLabel(host, apps)
			app, ok := p.app(slug)
			if !ok || slug == "" {
				p.writeError(w, r, errUnknownHost())
				return
			}
			p.serveAppAt(w, r, app, "")
		case underDomain(host, nodes):
			target, _ := HostLabel(host, nodes)
			h, ok := p.homes.At(target)
			if !ok || target == "" {
				p.writeError(w, r, fault.New(fault.NotFound, homefault.CodeHomeNotFound, "There is no such home."))
				return
			}
			if edge.HasEncodedSlash(r.URL.RawPath) {
				p.writeError(w, r, errEncodedSlash("home routes do not take them", "publish the home's app with encoded_slashes: true"))
				return
			}
			sub := r.URL.Path
			prefix := "/node/" + h.spec.Target
			r.URL.Path = prefix + sub
			if r.URL.RawPath != "" {
				r.URL.RawPath = prefix + r.URL.RawPath
			}
			p.serveHome(w, r, h, p.nodeRoute(w, h), sub)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// underDomain reports whether host is a name below domain.
func underDomain(host, domain string) bool {
	return domain != "" && strings.HasSuffix(host, "."+strings.ToLower(domain))
}

// errUnknownHost answers a host-routed name that maps to nothing.
func errUnknownHost() error {
	return fault.New(fault.NotFound, "unknown_host", "There is no app or home at this host name.")
}

// HostLabel returns the label that host has directly under domain (the
// app's slug or the home's target), when it is a valid slug.
func HostLabel(host, domain string) (string, bool) {
	if domain == "" || len(host) <= len(domain)+1 {
		return "", false
	}
	label, ok := strings.CutSuffix(host, "."+strings.ToLower(domain))
	if !ok || !registry.ValidSlug(label) {
		return "", false
	}
	return label, true
}
