package tlsfront

import (
	"net"
	"net/http"
	"strings"
)

// HTTPHandler is the plain-HTTP listener's handler: it answers ACME
// HTTP-01 challenges, and redirects every other request to HTTPS on
// httpsPort ("443" leaves it out of the URL). The target's host is the
// request's Host only when known reports that the gateway serves it (a
// managed name, an app or home under the host-routing domains); any other
// Host gets 404 with no Location, so a forged Host header never becomes
// an open redirect.
func (f *Front) HTTPHandler(known func(host string) bool, httpsPort string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.issuer != nil && f.issuer.HandleHTTPChallenge(w, r) {
			return
		}
		if strings.HasPrefix(r.URL.Path, challengePath) {
			// A challenge path with no challenge pending: never redirected.
			http.NotFound(w, r)
			return
		}
		host, ok := RequestHost(r.Host)
		if !ok || !known(host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("unknown_host: This host is not served here; use HTTPS with a name this gateway serves.\n"))
			return
		}
		if httpsPort != "" && httpsPort != "443" {
			host = net.JoinHostPort(host, httpsPort)
		}
		target := "https://" + host + r.URL.RequestURI()
		w.Header().Set("Connection", "close")
		http.Redirect(w, r, target, http.StatusPermanentRedirect)
	})
}

// challengePath is where ACME HTTP-01 challenges are answered.
const challengePath = "/.well-known/acme-challenge/"

// RequestHost returns the host name of a Host header, lower-cased and
// without its port, and whether it is a valid host name (IP literals are
// not).
func RequestHost(hostport string) (string, bool) {
	h := hostport
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		var port string
		h, port = h[:i], h[i+1:]
		for _, c := range port {
			if c < '0' || c > '9' {
				return "", false
			}
		}
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if !ValidHostName(h) || net.ParseIP(h) != nil {
		return "", false
	}
	return h, true
}

// Managed reports whether name is one of the configured names.
func (f *Front) Managed(name string) bool {
	for _, n := range f.opts.Names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}
