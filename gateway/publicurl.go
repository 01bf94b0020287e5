package gateway

import (
	"net"
	"strings"

	"github.com/wakegate/wakegate/config"
)

// publicBase is the base URL of the public listener for links (no
// trailing slash), listening at listen (the bound address, so that port 0
// names the real port). Its host is empty when the listener has none
// (":8080"): a browser fills in the host it reached the dashboard at.
func publicBase(c *config.Config, listen string) string {
	if c.PublicURL != "" {
		return strings.TrimSuffix(c.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if c.TLS.On() && len(c.TLS.Names) > 0 && !strings.HasPrefix(c.TLS.Names[0], "*") {
		if port == "443" {
			return "https://" + c.TLS.Names[0]
		}
		return "https://" + net.JoinHostPort(c.TLS.Names[0], port)
	}
	scheme := "http"
	if c.TLS.On() {
		scheme = "https"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = ""
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// appURL is where people open the app: its own host under
// hosts.apps_domain, else /apps/{slug}/ under the public base.
func appURL(c *config.Config, slug, listen string) string {
	if c.Hosts.AppsDomain != "" {
		scheme := "http"
		if c.TLS.On() {
			scheme = "https"
		}
		return scheme + "://" + slug + "." + c.Hosts.AppsDomain + "/"
	}
	return publicBase(c, listen) + "/apps/" + slug + "/"
}

// appURL is where people open the app at slug.
func (g *Gateway) appURL(slug string) string {
	listen := g.cfg.Listen
	if a := g.bound.Load(); a != nil {
		listen = *a
	}
	return appURL(g.cfg, slug, listen)
}
