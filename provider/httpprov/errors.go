package httpprov

import (
	"fmt"
	"strings"
	"time"
)

// Codes the client itself gives an Error, beside the control plane's own.
const (
	// CodeUnreachable: no answer (connection refused, reset, timed out).
	CodeUnreachable = "control_plane_unreachable"
	// CodeRefused: the control plane refused the signature (401, 403).
	CodeRefused = "control_plane_refused"
	// CodeBadAnswer: the answer broke the contract (bad JSON, no
	// endpoint with state running).
	CodeBadAnswer = "control_plane_bad_answer"
	// CodeHomeFailed: the control plane reports the home failed.
	CodeHomeFailed = "home_failed"
	// CodeDeadline: the operation's deadline ran out while the control
	// plane was still working on it.
	CodeDeadline = "control_plane_deadline"
)

// Error is a failed call to the control plane. It carries the control
// plane's code, reason and Retry-After so they reach the caller.
type Error struct {
	// Op is the operation: wake, suspend, stop, recreate, status, version.
	Op string
	// Home is the home's id.
	Home string
	// Status is the HTTP status of the last answer; 0 when none came.
	Status int
	// Code is the control plane's code, or one of the Code* constants.
	Code string
	// Reason is the control plane's sentence, or the client's.
	Reason string
	// RetryAfter is when the control plane asked to be tried again; zero
	// when it did not say.
	RetryAfter time.Duration
	// Hint is the likely fix, for operators.
	Hint string
	// Err is the underlying error (a transport error, the context's).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "http provider: %s %s: ", e.Op, e.Home)
	if e.Status != 0 {
		fmt.Fprintf(&b, "control plane answered %d", e.Status)
		if e.Code != "" {
			fmt.Fprintf(&b, " %s", e.Code)
		}
	} else {
		b.WriteString(e.Code)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonCode returns the stable code of the failure.
func (e *Error) ReasonCode() string { return e.Code }

// RetryAfterHint returns when the control plane asked to be tried again.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }
