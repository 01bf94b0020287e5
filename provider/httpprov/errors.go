package httpprov

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// Reason codes this provider gives a *provider.Error beside the provider
// package's own (provider.ReasonRateLimited and the rest) and the codes a
// control plane answers with, which are passed on as they are.
const (
	// ReasonBadAnswer: the answer broke the contract (not JSON, running
	// with no endpoint).
	ReasonBadAnswer = "bad_answer"
	// ReasonHomeFailed: the control plane reports the home failed.
	ReasonHomeFailed = "home_failed"
	// ReasonDeadline: the operation's deadline ran out while the control
	// plane was still working on it.
	ReasonDeadline = "deadline"
)

// Hints for operators.
const (
	hintUnreachable = "check that the control plane runs and that providers.http.base_url points at it"
	hintRefused     = "check that the gateway and the control plane share providers.http.secret and that their clocks agree within the replay window"
	hintDeadline    = "the control plane takes longer than the wake allows: raise wake.ready_timeout or make the home start faster"
	hintBadAnswer   = "the control plane must answer as docs/http-provider.md says"
)

// AnswerError is an error answer of the control plane (4xx or 5xx): the
// cause of the *provider.Error a call returns.
type AnswerError struct {
	// Status is the HTTP status.
	Status int
	// Code is the control plane's code, if it gave one.
	Code string
	// Reason is the control plane's sentence, or the start of a body
	// that was not JSON.
	Reason string
}

func (e *AnswerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the control plane answered %d", e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, ": %s", e.Reason)
	}
	return b.String()
}

// reasonFor is the reason code of an error answer: the control plane's
// own, or one the status implies.
func reasonFor(ae *AnswerError) string {
	switch {
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
		return provider.ReasonRefused
	case ae.Code != "":
		return ae.Code
	case ae.Status == http.StatusTooManyRequests:
		return provider.ReasonRateLimited
	case ae.Status == http.StatusNotFound:
		return provider.ReasonNotFound
	case ae.Status == http.StatusConflict:
		return provider.ReasonConflict
	case ae.Status >= 500:
		return provider.ReasonUnavailable
	}
	return fmt.Sprintf("http_%d", ae.Status)
}

// answerFailure is the *provider.Error of an error answer.
func answerFailure(op string, ae *AnswerError, retry time.Duration) *provider.Error {
	pe := &provider.Error{Op: op, Reason: reasonFor(ae), RetryAfter: retry, Err: ae}
	switch ae.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		pe.Hint = hintRefused
	case http.StatusNotImplemented:
		pe.Err = fmt.Errorf("%w: %w", provider.ErrUnsupported, ae)
	}
	return pe
}

// deadlineFailure is an operation whose deadline ran out; what says what
// the control plane last reported.
func deadlineFailure(op, what string, err error) *provider.Error {
	return &provider.Error{Op: op, Reason: ReasonDeadline, Hint: hintDeadline,
		Err: fmt.Errorf("%s when the deadline ran out: %w", what, err)}
}

// badAnswer is an answer that breaks the contract.
func badAnswer(op string, err error) *provider.Error {
	return &provider.Error{Op: op, Reason: ReasonBadAnswer, Hint: hintBadAnswer, Err: err}
}

// retryable reports whether a failed request may pass on a second try: no
// answer at all, or 408, 409, 425, 429 and 5xx but 501.
func retryable(err error) bool {
	var ae *AnswerError
	if !errors.As(err, &ae) {
		pe, ok := provider.AsError(err)
		return ok && pe.Reason == provider.ReasonUnavailable
	}
	switch ae.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented:
		return false
	}
	return ae.Status >= 500
}
