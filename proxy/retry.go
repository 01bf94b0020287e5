package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/wakegate/wakegate/proxy/h1client"
)

// retryUpstream is the one retry decision of both forward paths (DESIGN's
// "retries once if the request can be replayed"), called after a forward
// of req on route failed with err before any response.
//
// A failure of the client (a body cut for its rate, or unreadable) is not
// the upstream's: nothing is reported and nothing retried. Otherwise the
// failure is reported to the route (OnFailure drops the home's warm
// verdict), and the request is retried only when the upstream could not be
// reached (unreached), the route can give a fresh upstream after a new
// wake (Retry), and req can be replayed. Then the route and its outbound
// plan take that upstream and its Host, and it is returned; a nil URL
// comes with the error to answer. The caller sends the request once more,
// and reports that send's failure (forwarding.failed).
func (p *Proxy) retryUpstream(route *forwarding, req *http.Request, err error) (*url.URL, error) {
	if route.bodyCut.Load() || route.clientBodyFailed() != nil {
		return nil, err
	}
	route.failed(req)
	// A home not yet proven ready that closes unanswered did not serve the
	// request either (forward.Route.Queued).
	notServed := unreached(err) || route.Queued && closedUnanswered(err)
	if route.Retry == nil || !notServed || !replayable(req) {
		return nil, err
	}
	u, rerr := route.Retry(req.Context())
	if rerr != nil {
		return nil, rerr
	}
	route.Upstream = u
	route.out.host = p.outHost(route, u)
	return u, nil
}

// failed tells the route's owner that a forward of req failed, unless the
// failure is the caller going away.
func (route *forwarding) failed(req *http.Request) {
	if route.OnFailure != nil && req.Context().Err() == nil {
		route.OnFailure()
	}
}

// closedUnanswered reports whether err is an upstream's close before the
// first byte of its answer.
func closedUnanswered(err error) bool {
	var pa *h1client.PartialAnswer
	return !errors.As(err, &pa) && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF))
}

// replayable reports whether req can be sent again: it has no body, or
// can make its body again. A request a client sent with a body cannot.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}
