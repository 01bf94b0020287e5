package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// homeError is another package's error type with the same methods as Error.
type homeError struct{ retry time.Duration }

func (e *homeError) Error() string             { return "home not ready" }
func (e *homeError) HTTPStatus() int           { return http.StatusServiceUnavailable }
func (e *homeError) ErrorCode() string         { return "home_waking" }
func (e *homeError) RetryAfter() time.Duration { return e.retry }
func (e *homeError) ErrorHeader() http.Header  { return http.Header{"X-Home": {"h1"}} }

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestStatusOf(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name   string
		err    error
		status int
		code   string
		retry  time.Duration
	}{
		{"typed", &Error{Status: 418, Code: "teapot", Msg: "short and stout"}, 418, "teapot", 0},
		{"typed with retry", &Error{Status: 503, Code: "home_waking", Msg: "waking", Retry: 5 * time.Second}, 503, "home_waking", 5 * time.Second},
		{"typed wrapped", fmt.Errorf("serve: %w", &Error{Status: 429, Code: "rate_limited", Msg: "slow down"}), 429, "rate_limited", 0},
		{"other package's type", fmt.Errorf("ensure: %w", &homeError{retry: 1500 * time.Millisecond}), 503, "home_waking", 1500 * time.Millisecond},
		{"body too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, "body_too_large", 0},
		{"dial refused", &DialError{Err: refused}, 502, "upstream_unreachable", 0},
		{"dial timed out", &DialError{Err: timeoutErr{}}, 504, "upstream_timeout", 0},
		{"dial deadline", &DialError{Err: context.DeadlineExceeded}, 504, "upstream_timeout", 0},
		{"response timeout", fmt.Errorf("roundtrip: %w", timeoutErr{}), 504, "upstream_timeout", 0},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), 504, "upstream_timeout", 0},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), 502, "bad_gateway", 0},
		{"anything else", errors.New("boom"), 502, "bad_gateway", 0},
	}
	for _, c := range cases {
		got := StatusOf(c.err)
		if got.Status != c.status || got.Code != c.code || got.RetryAfter != c.retry || got.Message == "" {
			t.Errorf("%s: StatusOf = %+v; want %d %s retry %s", c.name, got, c.status, c.code, c.retry)
		}
	}
	if h := StatusOf(&homeError{}).Header.Get("X-Home"); h != "h1" {
		t.Errorf("header of a typed error = %q; want h1", h)
	}
	if m := StatusOf(&http.MaxBytesError{Limit: 1234}).Message; !strings.Contains(m, "1234") {
		t.Errorf("body limit message %q does not name the limit", m)
	}
}

func TestUnreached(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&DialError{Err: errors.New("x")}, true},
		{fmt.Errorf("rt: %w", &DialError{Err: errors.New("x")}), true},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{timeoutErr{}, false},
		{context.Canceled, false},
		{errors.New("EOF in the middle of a response"), false},
	} {
		if got := unreached(c.err); got != c.want {
			t.Errorf("unreached(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}

func TestWriteClassifiedJSON(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/apps/a/x", nil)
	r.Header.Set("Accept", "application/json")
	r.Header.Set("X-Request-Id", "req-1")
	w := httptest.NewRecorder()
	WriteClassified(w, r, Classified{Status: 503, Code: "home_waking", Message: "waking up",
		RetryAfter: 1200 * time.Millisecond, Header: http.Header{"X-Extra": {"1"}}})
	res := w.Result()
	if res.StatusCode != 503 {
		t.Fatalf("status = %d", res.StatusCode)
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json", "Retry-After": "2", "Cache-Control": "no-store",
		"X-Content-Type-Options": "nosniff", "X-Extra": "1",
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != "home_waking" || body.Error.Message != "waking up" || body.Error.RequestID != "req-1" {
		t.Errorf("body = %+v; want code, message and request id", body)
	}
}

func TestWriteClassifiedHTML(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9")
	w := httptest.NewRecorder()
	WriteClassified(w, r, Classified{Status: 502, Code: "bad_gateway", Message: `<script>alert(1)</script>`})
	if w.Code != 502 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	if w.Header().Get("Retry-After") != "" {
		t.Errorf("Retry-After %q without a retry", w.Header().Get("Retry-After"))
	}
	b := w.Body.String()
	if strings.Contains(b, "<script>") || !strings.Contains(b, "&lt;script&gt;") {
		t.Errorf("message not escaped in page:\n%s", b)
	}
	if !strings.Contains(b, "Bad Gateway") || !strings.Contains(b, "bad_gateway") {
		t.Errorf("page lacks the status text or code:\n%s", b)
	}
}

func TestWriteErrorUsesStatusOf(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	w := httptest.NewRecorder()
	WriteError(w, r, fmt.Errorf("x: %w", &http.MaxBytesError{Limit: 5}))
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "body_too_large") {
		t.Fatalf("got %d %s; want 413 body_too_large", w.Code, w.Body.String())
	}
}
