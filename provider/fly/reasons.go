package fly

import (
	"errors"

	"github.com/wakegate/wakegate/provider"
)

// hints are the operator's likely fix for each reason code.
var hints = map[string]string{
	CodeRateLimited:  "the Machines API limits calls per machine and action; try again after the Retry-After",
	CodeUnavailable:  "the Machines API did not answer: check providers.fly.base_url and Fly's status page",
	CodeUnauthorized: "the API refused providers.fly.token: create one for the homes' app (fly tokens create deploy --app APP)",
	CodeNotFound:     "no such machine in providers.fly.app: check the home's options.machine (fly machine list --app APP)",
	CodeLeaseHeld:    "another client holds the machine's lease (fly machine lease view ID --app APP); it ends at its TTL",
	CodeWaitTimeout:  "the machine did not reach the state in time: see fly machine status ID --app APP",
	CodeDestroyed:    "the home's machine is gone: create a machine and give the home its id in options.machine",
	CodeStartFailed:  "the machine could not be started or did not boot: see fly machine status ID --app APP and fly logs --app APP",
	CodeRejected:     "the Machines API refused the request; its message says why",
	CodeNoImage:      "set the roll target's image, or providers.fly.image with {version}",
	CodeVersion:      "the home's version could not be read: check providers.fly.version_from",
}

// wrap turns an error of operation op into a *provider.Error with the
// reason code, retry-after and hint of the *Error in it; nil stays nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		return err
	}
	out := &provider.Error{Op: op, Err: err}
	if fe, ok := AsError(err); ok {
		out.Reason, out.Hint, out.RetryAfter = fe.Code, hints[fe.Code], fe.RetryAfter
	}
	return out
}
