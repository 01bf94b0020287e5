package wake

import (
	"net/http"

	"github.com/wakegate/wakegate/probe"
)

// AppPaths names the direct health paths of the apps that run inside a
// home: an auto probe of the home tries them too, since they are its real
// serving path. The app status ladder (appstatus.Apps) implements it.
type AppPaths interface {
	// HomeProbePaths returns the GETs to add to an auto probe of home id,
	// in order; nil for none. It must return at once.
	HomeProbePaths(id string) []probe.Path
}

// UseAppPaths has every later auto probe of a home also try the paths p
// names for it; nil forgets them.
func (e *Engine) UseAppPaths(p AppPaths) {
	if p == nil {
		e.appPaths.Store(nil)
		return
	}
	e.appPaths.Store(&p)
}

// SetRelayHeader adds home id's relay token to hdr under the relay
// header, when the home has one: a direct health check of an app in the
// home carries it, as a forwarded request does.
func (e *Engine) SetRelayHeader(id string, hdr http.Header) {
	if h := e.home(id); h != nil && h.spec.RelayToken != "" {
		hdr.Set(e.o.RelayHeader, h.spec.RelayToken)
	}
}
