package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/fault"
)

// ErrorBody is the body of every admin error answer. The admin API is for
// operators: unlike a public error body it carries the cause and the hint.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error of an ErrorBody.
type ErrorDetail struct {
	// Code is a stable snake_case code ("home_not_found", "conflict").
	Code string `json:"code"`
	// Message is a sentence for people.
	Message string `json:"message"`
	// Field names the request field, header or path parameter at fault;
	// several are comma separated (Fields then has one entry each).
	Field string `json:"field"`
	// Cause is the underlying error, when there is one.
	Cause string `json:"cause,omitempty"`
	// Hint is the likely fix, when one is known.
	Hint string `json:"hint,omitempty"`
	// RequestID is the request's X-Request-Id, also in the log line.
	RequestID string `json:"request_id"`
	// Fields lists every bad field of a request that has several.
	Fields []fault.FieldError `json:"fields,omitempty"`
}

// fail answers err. It is the admin API's one way to write an error: the
// status, Retry-After and headers come from fault.Classify, and the body
// carries the cause and the hint for the operator. Server errors are
// logged with their cause and the request id.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	c := fault.Classify(err)
	d := ErrorDetail{Code: c.Code, Message: c.Message, Field: c.Field, Hint: c.Hint,
		RequestID: w.Header().Get("X-Request-Id")}
	if c.Cause != c.Message {
		d.Cause = c.Cause
	}
	var fe fault.FieldErrors
	if errors.As(err, &fe) {
		d.Fields, d.Cause = fe, ""
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if n := fault.RetryAfterSeconds(c.RetryAfter); n > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(n))
	}
	level := s.log.Debug
	if c.Status >= http.StatusInternalServerError {
		level = s.log.Warn
	}
	level("admin request failed", "method", r.Method, "path", r.URL.Path, "status", c.Status, "code", c.Code,
		"cause", c.Cause, "request_id", d.RequestID)
	writeJSON(w, c.Status, ErrorBody{Error: d})
}

// methodNotAllowed answers a method the path does not serve. 405 is the
// router's answer, not a kind of failure, so it is written here.
func (s *Server) methodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: ErrorDetail{Code: "method_not_allowed",
		Message: "method not allowed on this path", RequestID: w.Header().Get("X-Request-Id")}})
}

// writeJSON answers v, indented.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ifMatch reads If-Match: a record generation, quoted or not ("7", W/"7",
// 7); 0 when absent or "*".
func ifMatch(r *http.Request) (uint64, error) {
	raw := r.Header.Get("If-Match")
	v := strings.TrimSpace(raw)
	if v == "" || v == "*" {
		return 0, nil
	}
	v = strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fault.New(fault.Invalid, "bad_if_match",
			fmt.Sprintf("want a record generation such as \"7\", got %q", raw)).WithField("If-Match").
			WithHint("send the ETag of the record as read")
	}
	return n, nil
}

// etag is the ETag of a record generation.
func etag(gen uint64) string { return `"` + strconv.FormatUint(gen, 10) + `"` }
