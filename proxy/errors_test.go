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

	"github.com/wakegate/wakegate/fault"
)

// homeError is an engine error: a kind with a public code and sentence,
// and an internal cause.
func homeError(retry time.Duration) error {
	e := fault.Wrap(fault.NotReady, "home_waking", "The home is still waking.",
		errors.New("exec: /srv/homes/h1/run.sh: pid 4242 on 127.0.0.1:39999 refused")).WithRetry(retry)
	e.Header = http.Header{"X-Home": {"h1"}}
	return e
}

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
		hint   string // a part of the operator's hint; "" for none
	}{
		{"kind", fault.New(fault.Forbidden, "teapot", "Short and stout."), 403, "teapot", 0, ""},
		{"kind with retry", fault.New(fault.Failed, "wake_failed", "Failed.").WithRetry(5 * time.Second), 503, "wake_failed", 5 * time.Second, ""},
		{"kind wrapped", fmt.Errorf("serve: %w", fault.New(fault.Limited, "rate_limited", "Slow down.").WithRetry(2*time.Second)), 429, "rate_limited", 2 * time.Second, ""},
		{"engine error", fmt.Errorf("ensure: %w", homeError(1500*time.Millisecond)), 503, "home_waking", 1500 * time.Millisecond, ""},
		{"body too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, "body_too_large", 0, "server.max_body_bytes"},
		{"dial refused", &DialError{Err: refused}, 502, "upstream_unreachable", 0, "nothing accepts connections"},
		{"no such host", &DialError{Err: &net.DNSError{Err: "no such host", Name: "app.invalid", IsNotFound: true}}, 502, "upstream_unreachable", 0, "does not resolve"},
		{"dial failed", &DialError{Err: errors.New("network is unreachable")}, 502, "upstream_unreachable", 0, "cannot be reached"},
		{"dial timed out", &DialError{Err: timeoutErr{}}, 504, "upstream_timeout", 0, "proxy.dial_timeout"},
		{"dial deadline", &DialError{Err: context.DeadlineExceeded}, 504, "upstream_timeout", 0, "proxy.dial_timeout"},
		{"response timeout", fmt.Errorf("roundtrip: %w", timeoutErr{}), 504, "upstream_timeout", 0, "response_header_timeout"},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), 504, "upstream_timeout", 0, "response_header_timeout"},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), 502, "bad_gateway", 0, "closed or broke"},
		{"anything else", errors.New("boom"), 502, "bad_gateway", 0, "closed or broke"},
	}
	for _, c := range cases {
		got := StatusOf(c.err)
		if got.Status != c.status || got.Code != c.code || got.RetryAfter != c.retry || got.Message == "" {
			t.Errorf("%s: StatusOf = %+v; want %d %s retry %s", c.name, got, c.status, c.code, c.retry)
		}
		if (c.hint == "") != (got.Hint == "") || !strings.Contains(got.Hint, c.hint) {
			t.Errorf("%s: hint %q; want one with %q", c.name, got.Hint, c.hint)
		}
	}
	if h := StatusOf(homeError(time.Second)).Header.Get("X-Home"); h != "h1" {
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
	WriteClassified(w, r, fault.Response{Status: 503, Code: "home_waking", Message: "waking up",
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
	WriteClassified(w, r, fault.Response{Status: 502, Code: "bad_gateway", Message: `<script>alert(1)</script>`})
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

// TestWriteErrorHidesCauses answers with errors whose text names a path, a
// port, a pid and a command line: neither the JSON body nor the page may
// carry any of them, only the code, the sentence and the request id.
func TestWriteErrorHidesCauses(t *testing.T) {
	secret := []string{"/srv/homes", "4242", "39999", "127.0.0.1", "run.sh"}
	raw := errors.New("exec /srv/homes/h1/run.sh: pid 4242 on 127.0.0.1:39999 refused")
	for _, c := range []struct {
		name string
		err  error
		code string
	}{
		{"engine error with a cause", homeError(time.Second), "home_waking"},
		{"plain error", raw, "bad_gateway"},
		{"dial error", &DialError{Err: raw}, "upstream_unreachable"},
		{"timeout", fmt.Errorf("%w: %w", raw, context.DeadlineExceeded), "upstream_timeout"},
	} {
		for _, accept := range []string{"application/json", "text/html"} {
			r := httptest.NewRequest(http.MethodGet, "/node/h1/", nil)
			r.Header.Set("Accept", accept)
			r.Header.Set("X-Request-Id", "req-7")
			w := httptest.NewRecorder()
			WriteError(w, r, c.err)
			body := w.Body.String()
			if !strings.Contains(body, c.code) || !strings.Contains(body, "req-7") {
				t.Errorf("%s (%s): body %q lacks the code %s or the request id", c.name, accept, body, c.code)
			}
			for _, s := range secret {
				if strings.Contains(body, s) {
					t.Errorf("%s (%s): body %q shows %q", c.name, accept, body, s)
				}
			}
		}
	}
}
