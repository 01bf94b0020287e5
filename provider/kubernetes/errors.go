package kubernetes

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// Reason codes of the provider's own, beside provider's.
const (
	// ReasonImagePull is an image the cluster could not pull.
	ReasonImagePull = "image_pull"
	// ReasonCrashLoop is a container that keeps exiting.
	ReasonCrashLoop = "crash_loop"
)

// call names one API call for an operator: the verb RBAC checks, the
// resource (with its subresource) and where.
type call struct {
	verb, resource, ns, name string
}

// apiError turns a failed API call of op (for home id) into a
// *provider.Error whose hint names the resource and what to grant or fix.
// The cause stays for the log; none of it reaches a public answer.
func (p *Provider) apiError(op, id string, c call, err error) error {
	if err == nil {
		return nil
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		return err
	}
	what := c.resource
	if c.name != "" {
		what += " " + c.name
	}
	e := &provider.Error{Op: op, Err: fmt.Errorf("home %s: %s in namespace %s: %w", id, what, c.ns, err)}
	var se *kapi.StatusError
	if !errors.As(err, &se) {
		e.Reason = provider.ReasonUnavailable
		e.Hint = fmt.Sprintf("the API server at %s does not answer: check providers.kubernetes (kubeconfig, context) "+
			"and that the gateway can reach it", p.client.Server())
		return e
	}
	msg := strings.ToLower(se.Message)
	switch se.Code {
	case http.StatusForbidden:
		if strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "quota") {
			e.Reason = provider.ReasonCapacity
			e.Hint = fmt.Sprintf("the namespace %s's ResourceQuota is used up (%s): raise the quota or free room", c.ns, se.Message)
			return e
		}
		e.Reason = provider.ReasonRefused
		e.Hint = fmt.Sprintf("forbidden: the gateway's account cannot %s %s in namespace %s: grant %q on %s "+
			"(see deploy/kubernetes/rbac.yaml)", c.verb, c.resource, c.ns, c.verb, c.resource)
	case http.StatusUnauthorized:
		e.Reason = provider.ReasonRefused
		e.Hint = fmt.Sprintf("the API server refused the gateway's credentials (%s): renew the token or the certificate",
			p.cfgSource)
	case http.StatusNotFound:
		e.Reason = provider.ReasonNotFound
		e.Hint = fmt.Sprintf("there is no %s in namespace %s: check the home's options.name and options.namespace, "+
			"or create it", what, c.ns)
	case http.StatusConflict:
		e.Reason = provider.ReasonConflict
		e.Hint = fmt.Sprintf("%s kept changing under the gateway's writes: another client writes it too", what)
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		e.Reason = provider.ReasonBadConfig
		e.Hint = fmt.Sprintf("the API server refused the %s the gateway sent: %s", c.resource, se.Message)
	case http.StatusTooManyRequests:
		e.Reason = provider.ReasonRateLimited
	default:
		e.Reason = provider.ReasonUnavailable
	}
	return e
}
