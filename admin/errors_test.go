package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// TestFailWritesOneBody checks every kind of error is answered by the one
// writer: the status fault.Classify gives, Retry-After rounded up, the
// error's headers, and a body with the code, message, field, cause, hint
// and request id (cause and hint are for operators: the admin API shows
// them).
func TestFailWritesOneBody(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	cases := []struct {
		name   string
		err    error
		status int
		retry  string
		want   ErrorDetail
	}{
		{"invalid", fault.New(fault.Invalid, "invalid", "ttl: bad").WithField("ttl"), 400, "",
			ErrorDetail{Code: "invalid", Message: "ttl: bad", Field: "ttl"}},
		{"conflict with hint", fault.StaleIfMatch("home", 3, 4), 409, "",
			ErrorDetail{Code: "conflict", Message: "If-Match 3 is stale: the home is at generation 4", Field: "If-Match",
				Hint: "read the home again and retry with its ETag"}},
		{"not ready rounds up", fault.Wrap(fault.NotReady, "wake_timeout", "the home did not wake in time",
			errors.New("probe 127.0.0.1:9: connection refused")).WithRetry(1500 * time.Millisecond), 503, "2",
			ErrorDetail{Code: "wake_timeout", Message: "the home did not wake in time", Cause: "probe 127.0.0.1:9: connection refused"}},
		{"limited", fault.New(fault.Limited, "rate_limited", "slow down").WithRetry(10 * time.Millisecond), 429, "1",
			ErrorDetail{Code: "rate_limited", Message: "slow down"}},
		{"untyped is internal with its cause", fmt.Errorf("read home: %w", errors.New("disk on fire")), 500, "",
			ErrorDetail{Code: "internal", Message: "the gateway failed to handle the request", Cause: "read home: disk on fire"}},
		{"not found", fault.New(fault.NotFound, "home_not_found", "no home with id \"x\"").WithField("id"), 404, "",
			ErrorDetail{Code: "home_not_found", Message: "no home with id \"x\"", Field: "id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set("X-Request-Id", "adm-1")
			s.fail(w, httptest.NewRequest("GET", "/admin/x", nil), tc.err)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if got := w.Header().Get("Retry-After"); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
			var b ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
				t.Fatalf("body %s: %v", w.Body, err)
			}
			tc.want.RequestID = "adm-1"
			if fmt.Sprint(b.Error) != fmt.Sprint(tc.want) {
				t.Errorf("body\n got %+v\nwant %+v", b.Error, tc.want)
			}
		})
	}
}

// TestFailHeadersAndFields checks an error's own headers are sent and a
// request with several bad fields names each one.
func TestFailHeadersAndFields(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	e := fault.New(fault.Unauthorized, "unauthorized", "token required").WithField("Authorization")
	e.Header = http.Header{"Www-Authenticate": {"Bearer"}}
	w := httptest.NewRecorder()
	s.fail(w, httptest.NewRequest("GET", "/", nil), e)
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("unauthorized: %d %v", w.Code, w.Header())
	}

	var bad fault.FieldErrors
	if bad.Invalid() != nil {
		t.Fatal("no bad field is no error")
	}
	bad.Add("id", "want a slug, got %q", "Bad_ID")
	bad.Add("probe", "want ws, http or tcp")
	w = httptest.NewRecorder()
	s.fail(w, httptest.NewRequest("PUT", "/", nil), bad.Invalid())
	var b ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	d := b.Error
	if w.Code != 400 || d.Code != "invalid" || d.Field != "id,probe" || len(d.Fields) != 2 || d.Cause != "" ||
		!strings.Contains(d.Message, `id: want a slug, got "Bad_ID"`) || !strings.Contains(d.Message, "probe: want ws") {
		t.Errorf("field errors: %d %s", w.Code, w.Body)
	}
}

// TestBodyDecodeNamesTheField checks the strict decoder names the field at
// fault.
func TestBodyDecodeNamesTheField(t *testing.T) {
	cases := []struct{ body, field string }{
		{`{"colour":"blue"}`, "colour"},
		{`{"ttl":5}`, "ttl"},
		{`[1,2]`, "body"},
		{`{`, "body"},
		{``, "body"},
	}
	for _, tc := range cases {
		var v LeaseRequest
		err := BodyOf([]byte(tc.body)).Decode(&v)
		fe, ok := fault.As(err)
		if !ok || fe.Kind != fault.Invalid || fe.Field != tc.field {
			t.Errorf("%s: %v (field %q), want Invalid naming %q", tc.body, err, fe.Field, tc.field)
		}
	}
	var v LeaseRequest
	if err := BodyOf([]byte(`{"ttl":"1m"}`)).Decode(&v); err != nil || v.TTL != "1m" {
		t.Errorf("good body: %v %+v", err, v)
	}
}

// TestIfMatch checks the generations If-Match may carry.
func TestIfMatch(t *testing.T) {
	cases := []struct {
		in   string
		gen  uint64
		fail bool
	}{
		{"", 0, false}, {"*", 0, false}, {`"7"`, 7, false}, {`W/"7"`, 7, false}, {"7", 7, false},
		{" 12 ", 12, false}, {"0", 0, true}, {"seven", 0, true}, {`"-1"`, 0, true},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("PUT", "/", nil)
		if tc.in != "" {
			r.Header.Set("If-Match", tc.in)
		}
		gen, err := ifMatch(r)
		if gen != tc.gen || (err != nil) != tc.fail {
			t.Errorf("If-Match %q: %d, %v", tc.in, gen, err)
		}
		if err != nil && !fault.Is(err, fault.Invalid) {
			t.Errorf("If-Match %q: error of kind %v", tc.in, fault.KindOf(err))
		}
	}
}

// TestAllowedHosts checks the Host values an admin listener answers.
func TestAllowedHosts(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}
	cases := []struct {
		listen string
		extra  []string
		yes    []string
		no     []string
	}{
		{"127.0.0.1:0", nil, []string{"127.0.0.1:8081", "localhost:8081", "[::1]:8081"}, []string{"evil.example:8081", "127.0.0.1:1", "localhost"}},
		{"127.0.0.1:8081", []string{"Admin.Example", "ops.example:9000"}, []string{"admin.example:8081", "ops.example:9000"}, []string{"ops.example:8081"}},
		{"10.0.0.5:8081", nil, []string{"10.0.0.5:8081", "127.0.0.1:8081"}, []string{"localhost:8081"}},
	}
	for _, tc := range cases {
		got := AllowedHosts(tc.listen, bound, tc.extra)
		for _, h := range tc.yes {
			if !got[h] {
				t.Errorf("%s %v: %s refused", tc.listen, tc.extra, h)
			}
		}
		for _, h := range tc.no {
			if got[h] {
				t.Errorf("%s %v: %s answered", tc.listen, tc.extra, h)
			}
		}
	}
}

// TestFailuresBlockAfterBurst checks a client IP is refused once it failed
// its burst, another IP is not, and many IPs together meet the global cap.
func TestFailuresBlockAfterBurst(t *testing.T) {
	f := newFailures(3)
	for i := range 3 {
		if d := f.fail("192.0.2.1"); d != 0 {
			t.Fatalf("failure %d refused before the burst: %s", i+1, d)
		}
	}
	if d := f.fail("192.0.2.1"); d <= 0 || d > 20*time.Second {
		t.Errorf("after the burst: wait %s, want up to 20s", d)
	}
	if d := f.fail("192.0.2.2"); d != 0 {
		t.Errorf("another address refused: %s", d)
	}
	refused := 0
	for i := range 100 {
		if f.fail("198.51.100."+strconv.Itoa(i)) > 0 {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("100 addresses failing once each: none refused, want the global cap of %d to refuse some", 3*failGlobalFactor)
	}
}
