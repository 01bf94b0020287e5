package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// DialError is an upstream that could not be reached: the connection was
// never made, so nothing was sent and the request is always safe to retry.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial upstream: " + e.Err.Error() }

// Unwrap returns the dial error.
func (e *DialError) Unwrap() error { return e.Err }

// StatusOf sorts an error into its kind (Sort) and maps the kind to a status
// through fault.Classify, the one place where kinds become statuses: 502 by
// default, 504 when the upstream timed out, 413 past the body limit, and
// whatever kind the engine's error carries (503 with Retry-After for a home
// that did not wake in time). The public message is the kind's fixed
// sentence, never the error's text; the cause and the hint in the answer
// are for operators and never written to a public body.
func StatusOf(err error) fault.Response { return fault.Classify(Sort(err)) }

// Sort returns err as an error of a known kind: err itself when it carries
// one (a *fault.Error in its chain), else the data plane's kind for it, with
// err kept as the cause for the log.
func Sort(err error) error {
	if _, ok := fault.As(err); ok {
		return err
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fault.Wrap(fault.TooLarge, "body_too_large",
			"The request body is over the limit of "+strconv.FormatInt(mbe.Limit, 10)+" bytes.", err).WithHint(hintTooLarge)
	}
	var de *DialError
	timeout := errors.Is(err, context.DeadlineExceeded) || isTimeout(err)
	switch {
	case errors.As(err, &de):
		if timeout {
			return fault.Wrap(fault.Timeout, "upstream_timeout", "The upstream did not accept a connection in time.", err).
				WithHint(hintDialTimeout)
		}
		return fault.Wrap(fault.Upstream, "upstream_unreachable", "The upstream could not be reached.", err).
			WithHint(dialHint(err))
	case timeout:
		return fault.Wrap(fault.Timeout, "upstream_timeout", "The upstream did not answer in time.", err).
			WithHint(hintAnswerTimeout)
	}
	return fault.Wrap(fault.Upstream, "bad_gateway", "The upstream failed to answer.", err).WithHint(hintBadAnswer)
}

// The operator's likely fixes for the data plane's own kinds of failure,
// logged with the cause (never in a public body).
const (
	hintRefused = "nothing accepts connections at the upstream's address: start its server, " +
		"or check the address (apps[].upstream; for a home, its log shows whether its process is up and where it listens)"
	hintNoHost = "the upstream's host name does not resolve: check apps[].upstream, or this machine's DNS"
	hintDial   = "the upstream's address cannot be reached from the gateway: check apps[].upstream " +
		"and the network between them"
	hintDialTimeout = "the upstream's address did not accept a connection within proxy.dial_timeout: " +
		"a wrong host, a firewall that drops packets, or a server too busy to accept"
	hintAnswerTimeout = "the upstream took the request but sent no answer within proxy.response_header_timeout " +
		"(proxy.home_response_header_timeout for homes): a slow handler or a hung server, whose log says which; " +
		"an app that holds requests open on purpose (long polls) needs that timeout above its longest wait"
	hintTooLarge = "the caller sent a request body over server.max_body_bytes; raise it if this route " +
		"takes bigger uploads"
	hintBadAnswer = "the upstream closed or broke the connection before a whole answer, or sent one that is " +
		"not valid HTTP/1.1: look in its log for a crash at this time"
)

// dialHint is the likely fix for a dial that failed without timing out.
func dialHint(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return hintRefused
	case errors.As(err, &dns):
		return hintNoHost
	}
	return hintDial
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unreached reports whether err means no response could have been produced
// by the upstream: a failed dial, or a connection refused or reset before
// any byte of the response arrived.
func unreached(err error) bool {
	var pa *h1client.PartialAnswer
	if errors.As(err, &pa) {
		return false // a reset after the upstream began to answer
	}
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

// errorStyle is the error page's one style sheet, allowed by its hash.
const errorStyle = `body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:12vh auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}code{color:#666;font-size:.85rem}`

// errorPageCSP allows the error page nothing but its own style sheet, and
// no framing; errorCSP is the same for a JSON error.
var (
	errorPageCSP = "default-src 'none'; style-src 'sha256-" + styleHash(errorStyle) + "'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	errorCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func styleHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Status}} {{.StatusText}}</title>
<style>` + errorStyle + `</style></head>
<body><h1>{{.StatusText}}</h1><p>{{.Message}}</p>{{if .Retry}}<p>Try again in {{.Retry}} seconds.</p>{{end}}
<p><code>{{.Code}}{{if .RequestID}} · request {{.RequestID}}{{end}}</code></p></body></html>
`))

// WriteError answers r with err: a JSON body for API callers, a small page
// for browsers, with the status, Retry-After and headers StatusOf found.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	WriteClassified(w, r, StatusOf(err))
}

// WriteClassified answers r with an already classified error. It writes the
// public part only: c.Cause and c.Hint are for the caller's log.
func WriteClassified(w http.ResponseWriter, r *http.Request, c fault.Response) {
	h := w.Header()
	for k, vs := range c.Header {
		h[k] = vs
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	retry := fault.RetryAfterSeconds(c.RetryAfter)
	if retry > 0 {
		h.Set("Retry-After", strconv.Itoa(retry))
	}
	reqID := r.Header.Get("X-Request-Id")
	if WantsHTML(r) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", errorPageCSP)
		w.WriteHeader(c.Status)
		_ = errorPage.Execute(w, map[string]any{
			"Status": c.Status, "StatusText": http.StatusText(c.Status), "Message": c.Message,
			"Code": c.Code, "RequestID": reqID, "Retry": retry,
		})
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Security-Policy", errorCSP)
	w.WriteHeader(c.Status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: c.Code, Message: c.Message, Field: c.Field, RequestID: reqID}})
}

// bodyTooSlow is the answer to a request whose body was cut for arriving
// slower than the minimum rate (minrate.ErrBodyTooSlow).
var bodyTooSlow = fault.Response{Status: http.StatusRequestTimeout, Code: "body_too_slow",
	Message: "The request body arrived too slowly."}
