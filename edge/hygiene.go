package edge

import (
	"errors"
	"net/http"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/h1serve"
)

// maxRequestID is the longest X-Request-Id kept from a trusted proxy.
const maxRequestID = 128

// KeepsRequestID reports whether r's own X-Request-Id is kept: one that
// a trusted proxy (trusted: TrustedProxies.Peer) sent, of at most 128
// bytes. Any other request gets an id of the gateway's, before any answer.
func KeepsRequestID(r *http.Request, trusted bool) bool {
	id := r.Header.Get("X-Request-Id")
	return trusted && id != "" && len(id) <= maxRequestID
}

// Shape checks the shape of r before it is routed: the framing of its
// connection (DESIGN rule 24) and its path (rule 21). ok is true when r
// may be routed; its path is then the canonical one. Otherwise r was
// answered here (a 308 to its canonical path), or err is the refusal to
// answer with (bad_framing: the connection is marked to close; bad_path).
func Shape(w http.ResponseWriter, r *http.Request) (ok bool, err error) {
	// The framing watch is on net/http's connections only (the loop's
	// parser refuses what it would find), and a miss walks the whole
	// context: the loop's requests skip it.
	if !h1serve.Serves(w) {
		if err := FramingProblem(r.Context()); err != nil {
			w.Header().Set("Connection", "close")
			msg := "A request may not carry both Content-Length and Transfer-Encoding."
			if !IsConflict(err) {
				msg = "The framing of a request on this connection could not be followed."
			}
			return false, fault.New(fault.Invalid, "bad_framing", msg)
		}
	}
	if r.RequestURI == "*" {
		return true, nil
	}
	sent := r.URL.EscapedPath()
	// Encoded slashes pass here, kept encoded: only an app that takes
	// them serves such a request, every other route refuses it (route/).
	p, raw, err := CanonicalPathEncodedSlash(sent)
	if err != nil {
		return false, badPath(err)
	}
	if raw != sent { // never a silent reroute (DESIGN rule 21)
		redirectCanonical(w, r, raw)
		return false, nil
	}
	r.URL.Path, r.URL.RawPath = p, raw
	return true, nil
}

// redirectCanonical answers a request whose path is not canonical with a
// 308 to its canonical form raw (an absolute path: the canonical form has
// no "//" at its start, so the Location never names another host), so a
// cache in front and the gateway agree on which route a URL names.
func redirectCanonical(w http.ResponseWriter, r *http.Request, raw string) {
	loc := raw
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", loc)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusPermanentRedirect)
}

// badPath is the refusal of a request whose path CanonicalPath refused,
// naming the rule it broke (a fixed phrase) but not the path.
func badPath(err error) error {
	msg := "The request path is not canonical."
	var pe *PathError
	if errors.As(err, &pe) {
		msg = "The request path is refused: " + pe.Reason + "."
	}
	return fault.Wrap(fault.Invalid, "bad_path", msg, err)
}
