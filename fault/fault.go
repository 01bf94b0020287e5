// Package fault sorts errors into kinds. The engine and the stores say what
// happened (not ready, busy, not found, shutting down, failed with a reason
// code); the edge turns a kind into an HTTP status in one place (Classify).
//
// An Error has two audiences. Code and Message are public: a stable code and
// a sentence for people, with no path, port, pid or command in them. Cause
// and Hint are for operators: they reach the log, the admin API, the CLI and
// the dashboard, never a public body.
//
// DESIGN rule that lives here: 23 (two audiences: Classify is the one
// place where a kind becomes a status, for the public and the operator
// alike; Sentinel lets a package's error values carry their kind).
// FieldErrors and StaleIfMatch are the request errors that the admin API
// and the control plane share: every bad field of a declaration named at
// once, and the conflict of a stale If-Match.
package fault

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Kind says what sort of failure an error is. The zero Kind is Internal.
type Kind uint8

// The kinds. Each maps to one status in Classify.
const (
	// Internal is a failure of the gateway itself (500).
	Internal Kind = iota
	// NotReady: the home or app is not ready yet; try again after RetryAfter (503).
	NotReady
	// Busy: another operation or live sessions stop this one (409).
	Busy
	// NotFound: no such home, app, route or record (404).
	NotFound
	// ShuttingDown: the gateway is draining (503).
	ShuttingDown
	// Failed: the home or app failed, with a reason code (503).
	Failed
	// Conflict: the record changed since it was read (409).
	Conflict
	// Invalid: the request is malformed; Field names what is wrong (400).
	Invalid
	// Unavailable: a service the gateway needs (the store) does not answer (503).
	Unavailable
	// Limited: the caller is over a limit (429).
	Limited
	// Unauthorized: credentials are missing or wrong (401).
	Unauthorized
	// Forbidden: the caller may not do this (403).
	Forbidden
	// Upstream: the upstream failed to answer (502).
	Upstream
	// Timeout: the upstream did not answer in time (504).
	Timeout
	// TooLarge: the request body is over the limit (413).
	TooLarge
	// NotImplemented: the operation does not exist in this build or provider (501).
	NotImplemented
)

var kindNames = [...]string{"internal", "not_ready", "busy", "not_found", "shutting_down", "failed",
	"conflict", "invalid", "unavailable", "limited", "unauthorized", "forbidden", "upstream",
	"timeout", "too_large", "not_implemented"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is a failure of a known kind.
type Error struct {
	// Kind sorts the failure; Classify maps it to a status.
	Kind Kind
	// Code is a stable, public, snake_case code ("home_failed", "wake_timeout").
	Code string
	// Message is a public sentence for people. It never carries an internal
	// detail: Cause and Hint are where those go.
	Message string
	// Field names the request field at fault (Invalid, Conflict), if any.
	Field string
	// RetryAfter, when positive, is sent as Retry-After.
	RetryAfter time.Duration
	// Hint is the likely fix, for operators.
	Hint string
	// Header is added to the response (for example X-Wakegate-Home).
	Header http.Header
	// Cause is the underlying error, for operators and errors.Is/As.
	Cause error
}

// Error returns the public message followed by the cause, for logs.
func (e *Error) Error() string {
	if e.Cause != nil {
		return strings.TrimSuffix(e.Message, ".") + ": " + e.Cause.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// New returns an Error of kind k with a public code and message.
func New(k Kind, code, msg string) *Error { return &Error{Kind: k, Code: code, Message: msg} }

// Wrap returns an Error of kind k whose cause is err.
func Wrap(k Kind, code, msg string, err error) *Error {
	return &Error{Kind: k, Code: code, Message: msg, Cause: err}
}

// WithRetry sets RetryAfter and returns e.
func (e *Error) WithRetry(d time.Duration) *Error { e.RetryAfter = d; return e }

// WithHint sets the operator's hint and returns e.
func (e *Error) WithHint(h string) *Error { e.Hint = h; return e }

// WithField sets the field at fault and returns e.
func (e *Error) WithField(f string) *Error { e.Field = f; return e }

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// KindOf returns the kind of err: the kind of its first *Error, else of
// its Sentinel, Timeout for a deadline, Internal otherwise.
func KindOf(err error) Kind {
	if fe, ok := As(err); ok {
		return fe.Kind
	}
	var s *Sentinel
	if errors.As(err, &s) {
		return s.kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout
	}
	return Internal
}

// Sentinel is an error value a package exports for errors.Is (a store's
// ErrNotFound, the engine's ErrNoApp) that also knows its kind, public code
// and sentence, and the operator's hint. Classify and KindOf read it when
// the chain holds no *Error. As does not: a caller that keeps errors of a
// known kind as they are (the wake engine, the data plane's Sort) still
// gives a store's failure the meaning it has there (a failed wake, not a
// missing page).
type Sentinel struct {
	text  string
	kind  Kind
	code  string
	msg   string
	field string
	hint  string
}

// NewSentinel returns a sentinel error whose Error is text, of kind k with
// a public code and message.
func NewSentinel(text string, k Kind, code, msg string) *Sentinel {
	return &Sentinel{text: text, kind: k, code: code, msg: msg}
}

// Error returns the sentinel's text.
func (s *Sentinel) Error() string { return s.text }

// Hinted returns s with the operator's hint h; for package-level values,
// at initialisation.
func (s *Sentinel) Hinted(h string) *Sentinel { s.hint = h; return s }

// Fielded returns s naming the request field f; for package-level
// values, at initialisation.
func (s *Sentinel) Fielded(f string) *Sentinel { s.field = f; return s }

// classified returns err, whose chain holds s, as an *Error of s's kind:
// a new value each time, so that no caller can change the sentinel.
func (s *Sentinel) classified(err error) *Error {
	return &Error{Kind: s.kind, Code: s.code, Message: s.msg, Field: s.field, Hint: s.hint, Cause: err}
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Response is what Classify found out about an error: everything needed to
// answer a caller. Cause and Hint are for operators only.
type Response struct {
	Status     int
	Code       string
	Message    string
	Field      string
	RetryAfter time.Duration
	Header     http.Header
	// Cause is the internal detail (never in a public body).
	Cause string
	// Hint is the likely fix (never in a public body).
	Hint string
}

var statusOf = [...]int{
	Internal:       http.StatusInternalServerError,
	NotReady:       http.StatusServiceUnavailable,
	Busy:           http.StatusConflict,
	NotFound:       http.StatusNotFound,
	ShuttingDown:   http.StatusServiceUnavailable,
	Failed:         http.StatusServiceUnavailable,
	Conflict:       http.StatusConflict,
	Invalid:        http.StatusBadRequest,
	Unavailable:    http.StatusServiceUnavailable,
	Limited:        http.StatusTooManyRequests,
	Unauthorized:   http.StatusUnauthorized,
	Forbidden:      http.StatusForbidden,
	Upstream:       http.StatusBadGateway,
	Timeout:        http.StatusGatewayTimeout,
	TooLarge:       http.StatusRequestEntityTooLarge,
	NotImplemented: http.StatusNotImplemented,
}

// Status returns the HTTP status of kind k.
func Status(k Kind) int {
	if int(k) < len(statusOf) {
		return statusOf[k]
	}
	return http.StatusInternalServerError
}

// Classify maps an error of a known kind to its response: its first
// *Error, else its Sentinel, else a deadline (Timeout). It is the one place
// where kinds become statuses, for both audiences; errors of no kind are
// Internal with a generic public message (the cause is kept for
// operators).
func Classify(err error) Response {
	fe, ok := As(err)
	if !ok {
		var s *Sentinel
		switch {
		case errors.As(err, &s):
			fe, ok = s.classified(err), true
		case errors.Is(err, context.DeadlineExceeded):
			fe, ok = Wrap(Timeout, "timeout", "the operation did not finish in time", err), true
		}
	}
	if !ok {
		r := Response{Status: http.StatusInternalServerError, Code: "internal", Message: "the gateway failed to handle the request"}
		if err != nil {
			r.Cause = err.Error()
		}
		return r
	}
	r := Response{Status: Status(fe.Kind), Code: fe.Code, Message: fe.Message, Field: fe.Field,
		RetryAfter: fe.RetryAfter, Header: fe.Header, Hint: fe.Hint}
	if fe.Cause != nil {
		r.Cause = fe.Cause.Error()
	}
	if r.Code == "" {
		r.Code = fe.Kind.String()
	}
	if (fe.Kind == NotReady || fe.Kind == ShuttingDown || fe.Kind == Limited || fe.Kind == Unavailable) && r.RetryAfter <= 0 {
		r.RetryAfter = time.Second
	}
	return r
}

// RetryAfterSeconds rounds d up to whole seconds for a Retry-After header
// (at least 1 for any positive d; 0 for none).
func RetryAfterSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}
