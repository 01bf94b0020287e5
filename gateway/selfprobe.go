package gateway

import (
	"net/http"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/route"
)

// selfProbes is the gateway's self-probe client (control.SelfProber) as
// the listener meets its requests: the prober proves that a request is its
// own, and the listener marks it for the request path (DESIGN rule 14).
type selfProbes struct{ *control.SelfProber }

// hygiene removes the probe header from r and, when r is one of the
// prober's own self-probes, marks its context (route.MarkSelfProbe).
func (p selfProbes) hygiene(r *http.Request) (*http.Request, bool) {
	if !p.Admit(r) {
		return r, false
	}
	return route.MarkSelfProbe(r), true
}
