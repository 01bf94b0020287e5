package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// DialError is an upstream that could not be reached: the connection was
// never made, so nothing was sent and the request is always safe to retry.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial upstream: " + e.Err.Error() }

// Unwrap returns the dial error.
func (e *DialError) Unwrap() error { return e.Err }

// Error is an error with an HTTP status, a stable code for API callers and a
// message for people. Other packages return their own types with the same
// methods (HTTPStatus, ErrorCode and optionally RetryAfter) and StatusOf
// finds them with errors.As.
type Error struct {
	Status int
	Code   string
	Msg    string
	// Retry, when positive, is sent as Retry-After.
	Retry time.Duration
	// Header is added to the error response.
	Header http.Header
}

func (e *Error) Error() string { return e.Msg }

// HTTPStatus returns the status to answer with.
func (e *Error) HTTPStatus() int { return e.Status }

// ErrorCode returns the stable error code.
func (e *Error) ErrorCode() string { return e.Code }

// RetryAfter returns how long the caller should wait before trying again.
func (e *Error) RetryAfter() time.Duration { return e.Retry }

type statusError interface {
	error
	HTTPStatus() int
	ErrorCode() string
}

type retryAfterError interface{ RetryAfter() time.Duration }

type headerError interface{ ErrorHeader() http.Header }

// Classified is what StatusOf found out about an error.
type Classified struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	Header     http.Header
}

// StatusOf sorts an error into its kind and maps it to a status. This is the
// one place where errors become statuses: 502 by default, 504 when the
// upstream timed out, 413 past the body limit, and whatever a typed error
// says (503 with Retry-After for a home that did not wake in time).
func StatusOf(err error) Classified {
	if _, ok := fault.As(err); ok {
		r := fault.Classify(err)
		return Classified{Status: r.Status, Code: r.Code, Message: r.Message, RetryAfter: r.RetryAfter, Header: r.Header}
	}
	var se statusError
	if errors.As(err, &se) {
		c := Classified{Status: se.HTTPStatus(), Code: se.ErrorCode(), Message: se.Error()}
		var ra retryAfterError
		if errors.As(err, &ra) {
			c.RetryAfter = ra.RetryAfter()
		}
		var he headerError
		if errors.As(err, &he) {
			c.Header = he.ErrorHeader()
		}
		return c
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Classified{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: "request body exceeds " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
	}
	var de *DialError
	if errors.As(err, &de) {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return Classified{Status: http.StatusGatewayTimeout, Code: "upstream_timeout", Message: "the upstream did not accept a connection in time"}
		}
		return Classified{Status: http.StatusBadGateway, Code: "upstream_unreachable", Message: "the upstream could not be reached"}
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return Classified{Status: http.StatusGatewayTimeout, Code: "upstream_timeout", Message: "the upstream did not answer in time"}
	}
	return Classified{Status: http.StatusBadGateway, Code: "bad_gateway", Message: "the upstream failed to answer"}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unreached reports whether err means no response could have been produced
// by the upstream: a failed dial, or a connection refused or reset before
// any byte of the response arrived.
func unreached(err error) bool {
	var de *DialError
	return errors.As(err, &de) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// WantsHTML reports whether the caller is a browser that prefers a page to
// JSON: its Accept header names text/html.
func WantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Status}} {{.StatusText}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:12vh auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}code{color:#666;font-size:.85rem}</style></head>
<body><h1>{{.StatusText}}</h1><p>{{.Message}}</p>{{if .Retry}}<p>Try again in {{.Retry}} seconds.</p>{{end}}
<p><code>{{.Code}}{{if .RequestID}} · request {{.RequestID}}{{end}}</code></p></body></html>
`))

// WriteError answers r with err: a JSON body for API callers, a small page
// for browsers, with the status, Retry-After and headers StatusOf found.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	WriteClassified(w, r, StatusOf(err))
}

// WriteClassified answers r with an already classified error.
func WriteClassified(w http.ResponseWriter, r *http.Request, c Classified) {
	h := w.Header()
	for k, vs := range c.Header {
		h[k] = vs
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	retry := fault.RetryAfterSeconds(c.RetryAfter)
	if retry > 0 {
		h.Set("Retry-After", strconv.Itoa(retry))
	}
	reqID := r.Header.Get("X-Request-Id")
	if WantsHTML(r) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(c.Status)
		_ = errorPage.Execute(w, map[string]any{
			"Status": c.Status, "StatusText": http.StatusText(c.Status), "Message": c.Message,
			"Code": c.Code, "RequestID": reqID, "Retry": retry,
		})
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(c.Status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: c.Code, Message: c.Message, RequestID: reqID}})
}
