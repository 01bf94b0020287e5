package gateway

import (
	"context"
	"errors"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// adminFault gives err the kind the admin API answers it with. Errors
// that already are *fault.Error pass unchanged; the store's and the
// engine's sentinel errors get their kind here, with a sentence and a hint
// for the operator. Anything else stays an internal failure.
func adminFault(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.As(err); ok {
		return err
	}
	switch {
	case errors.Is(err, registry.ErrConflict):
		return fault.Wrap(fault.Conflict, "conflict", "the record changed since it was read (stale If-Match or a concurrent write)", err).
			WithField("If-Match").WithHint("read the record again and retry with its ETag")
	case errors.Is(err, registry.ErrNotFound):
		return fault.Wrap(fault.NotFound, "not_found", "no such record", err)
	case errors.Is(err, registry.ErrLocked):
		return fault.Wrap(fault.Busy, "home_busy", "the home has sessions or another operation on it is in progress", err).
			WithHint("end its sessions (or wait for the operation) and retry")
	case errors.Is(err, wake.ErrNoApp):
		return fault.Wrap(fault.NotFound, "app_not_found", "no such app", err).WithField("slug")
	case errors.Is(err, wake.ErrNotHome):
		return fault.Wrap(fault.Invalid, "not_home_app", "the app does not run in a home: there is nothing to restart", err).WithField("slug")
	case errors.Is(err, context.DeadlineExceeded):
		return fault.Wrap(fault.Timeout, "timeout", "the operation did not finish in time", err)
	}
	return err
}
