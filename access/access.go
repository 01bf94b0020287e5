// Package access decides who may reach a home or an app, before anything
// wakes it (DESIGN rule 25). A Policy looks at a request and the Subject it
// wants to reach and allows it (with headers to add upstream), refuses it
// with a public error of kind Unauthorized or Forbidden, or hands back the
// auth service's own answer (a Reply) to pass to the caller unchanged.
//
// The policies are public, deny, jwt (jwt.go) and forward_auth
// (forwardauth.go). A Set (set.go) names them and picks one for each
// route, with a default for every route no rule names, so that a new route
// is never open by accident. Abuse limits live in limits.go and the real
// client address in clientip.go.
package access

import (
	"context"
	"net/http"

	"github.com/wakegate/wakegate/fault"
)

// Subject is what a request wants to reach.
type Subject struct {
	// Kind is "node" (a home at /node/{target}) or "app".
	Kind string
	// Name is the target of a home or the slug of an app.
	Name string
	// Target is the target of the home the request would reach ("" for an
	// app outside any home). A jwt policy's claim must equal it or Owner.
	Target string
	// Owner is the home's owner as configured (access.homes[].owner), ""
	// for none.
	Owner string
}

// Decision is what an allowing policy adds to the request.
type Decision struct {
	// Header is set on the forwarded request, replacing any value the
	// caller sent under the same names (forward_auth's copied headers).
	Header http.Header
	// Strip names headers removed from the forwarded request whatever the
	// decision (forward_auth's copied header names, so a caller cannot
	// forge them when the auth service does not set them).
	Strip []string
	// DropCookies names cookies removed from the forwarded request's
	// Cookie header (the jwt policy's cookie, once checked), keeping the
	// caller's other cookies.
	DropCookies []string
	// Who names the caller for the log (a token's subject), "" if unknown.
	Who string
}

// Policy decides whether a request may reach a subject.
//
// Check is called for every request to a route the policy guards, before
// the home is woken or anything forwarded, from many goroutines at once. It
// returns nil error to allow. A refusal is a *fault.Error (Unauthorized,
// Forbidden, or Unavailable when the policy cannot decide: it fails closed)
// or a *Reply to pass to the caller as is; its Cause says why, for the log.
// Check honours ctx and is bounded in time by the policy's own limits.
type Policy interface {
	Check(ctx context.Context, r *http.Request, s Subject) (Decision, error)
}

// Closer is a Policy that owns background work (a JWKS refresh) to stop.
type Closer interface {
	Close()
}

// Reply is an answer of an auth service passed to the caller unchanged: a
// 401, a 403 or a redirect to a login page. It is an error so that Check
// can return it; Cause says why, for the log.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	Cause  error
}

// Error describes the reply for the log.
func (r *Reply) Error() string {
	s := "auth service answered " + http.StatusText(r.Status)
	if r.Cause != nil {
		s += ": " + r.Cause.Error()
	}
	return s
}

// Unwrap returns the cause.
func (r *Reply) Unwrap() error { return r.Cause }

// Write sends the reply to w.
func (r *Reply) Write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range r.Header {
		h[k] = vs
	}
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(r.Status)
	_, _ = w.Write(r.Body)
}

// Public allows every request.
type Public struct{}

// Check allows r.
func (Public) Check(context.Context, *http.Request, Subject) (Decision, error) {
	return Decision{}, nil
}

// Deny refuses every request with 403.
type Deny struct{}

// Check refuses r.
func (Deny) Check(context.Context, *http.Request, Subject) (Decision, error) {
	return Decision{}, fault.New(fault.Forbidden, "access_denied", "Access to this route is not allowed.").
		WithHint("the route's access policy is deny: give it a policy in access.homes or access.apps, or change access.default")
}

// Reason returns the operator's reason of a refusal err (its cause, or
// its text), for logs.
func Reason(err error) string {
	if fe, ok := fault.As(err); ok && fe.Cause != nil {
		return fe.Cause.Error()
	}
	return err.Error()
}

var (
	_ Policy = Public{}
	_ Policy = Deny{}
)
