package fly

import (
	"errors"
	"fmt"
	"time"
)

// Reason codes of an *Error. They are stable and safe to show: they name
// what went wrong with the Machines API, never a token, a URL or a body.
const (
	// CodeRateLimited: the API kept answering 429 and the deadline left
	// no room for the wait it asked for.
	CodeRateLimited = "fly_rate_limited"
	// CodeUnavailable: the API answered 5xx or could not be reached.
	CodeUnavailable = "fly_unavailable"
	// CodeUnauthorized: the token was refused (401, 403).
	CodeUnauthorized = "fly_unauthorized"
	// CodeNotFound: the app or machine does not exist (404).
	CodeNotFound = "fly_machine_not_found"
	// CodeLeaseHeld: another client holds the machine's lease (409) for
	// longer than the deadline allowed to wait.
	CodeLeaseHeld = "fly_lease_held"
	// CodeWaitTimeout: the machine did not reach the awaited state before
	// the deadline.
	CodeWaitTimeout = "fly_wait_timeout"
	// CodeDestroyed: the machine is destroyed or failed to launch for good.
	CodeDestroyed = "fly_machine_destroyed"
	// CodeStartFailed: the API answered a start with an error, or the
	// machine failed to boot and nothing will boot it again.
	CodeStartFailed = "fly_start_failed"
	// CodeRejected: the API refused the request (400, 412, 422, another 4xx).
	CodeRejected = "fly_rejected"
	// CodeNoImage: a recreate had neither an image nor an image template.
	CodeNoImage = "fly_no_image"
	// CodeVersion: the home's version could not be read.
	CodeVersion = "fly_version_unknown"
)

// Error is a failed Machines API operation. Code is a stable reason code;
// RetryAfter, when positive, is how long the API (or the lease holder)
// asked the caller to wait before trying again.
type Error struct {
	Op      string // the operation, e.g. "start", "wait started", "lease"
	Machine string // the machine id
	Status  int    // the API's HTTP status; 0 when no answer came
	Code    string // a reason code, one of the Code* constants
	// RetryAfter is the wait the API asked for, or the time left on a
	// lease held by someone else; zero when unknown.
	RetryAfter time.Duration
	// Message is the API's own error text (operators only).
	Message string
	// Err is the underlying error (a network error, a context error).
	Err error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("fly: %s machine %s", e.Op, e.Machine)
	if e.Status != 0 {
		s += fmt.Sprintf(": status %d", e.Status)
	}
	s += " (" + e.Code + ")"
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonCode returns the stable reason code.
func (e *Error) ReasonCode() string { return e.Code }

// RetryAfterHint returns how long the caller should wait before trying
// again; zero when the API gave no hint.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }

// AsError returns the first *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// codeForStatus is the reason code of a final (not retried) API status.
func codeForStatus(status int) string {
	switch {
	case status == 401 || status == 403:
		return CodeUnauthorized
	case status == 404:
		return CodeNotFound
	case status == 408:
		return CodeWaitTimeout
	case status == 409:
		return CodeLeaseHeld
	case status == 429:
		return CodeRateLimited
	case status >= 500:
		return CodeUnavailable
	}
	return CodeRejected
}
