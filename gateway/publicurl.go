package gateway

import (
	"net"
	"net/url"
	"strings"
)

// publicURL checks public_url: empty, or an absolute http(s) URL with a
// host and no path, query or fragment.
func (k checker) publicURL(field, v string) {
	if v == "" {
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		k.bad(field, "invalid URL %q: %v", v, err)
	case u.Scheme != "http" && u.Scheme != "https":
		k.bad(field, "%q: want an http:// or https:// URL", v)
	case u.Host == "" || u.User != nil:
		k.bad(field, "%q: want scheme://host[:port], with a host and no user", v)
	case strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		k.bad(field, "%q: want the base URL only, without a path, query or fragment", v)
	}
}

// publicBase is the base URL of the public listener for links (no
// trailing slash), listening at listen (the bound address, so that port 0
// names the real port). Its host is empty when the listener has none
// (":8080"): a browser fills in the host it reached the dashboard at.
func (c *Config) publicBase(listen string) string {
	if c.PublicURL != "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if c.TLS.on() && len(c.TLS.Names) > 0 && !strings.HasPrefix(c.TLS.Names[0], "*") {
		if port == "443" {
			return "https://" + c.TLS.Names[0]
		}
		return "https://" + net.JoinHostPort(c.TLS.Names[0], port)
	}
	scheme := "http"
	if c.TLS.on() {
		scheme = "https"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = ""
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// appURL is where people open the app: its own host under
// hosts.apps_domain, else /apps/{slug}/ under the public base.
func (c *Config) appURL(slug, listen string) string {
	if c.Hosts.AppsDomain != "" {
		scheme := "http"
		if c.TLS.on() {
			scheme = "https"
		}
		return scheme + "://" + slug + "." + c.Hosts.AppsDomain + "/"
	}
	return c.publicBase(listen) + "/apps/" + slug + "/"
}

// appURL is where people open the app at slug.
func (g *Gateway) appURL(slug string) string {
	listen := g.cfg.Listen
	if a := g.bound.Load(); a != nil {
		listen = *a
	}
	return g.cfg.appURL(slug, listen)
}
