package fault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	cause := errors.New("exec /opt/missing: no such file or directory")
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		retry  time.Duration
	}{
		{"not ready", New(NotReady, "home_waking", "the home is still waking").WithRetry(2 * time.Second), 503, "home_waking", 2 * time.Second},
		{"not ready default retry", New(NotReady, "home_waking", "x"), 503, "home_waking", time.Second},
		{"busy", New(Busy, "home_busy", "x"), 409, "home_busy", 0},
		{"not found", New(NotFound, "home_not_found", "x"), 404, "home_not_found", 0},
		{"failed wrapped", fmt.Errorf("wake h1: %w", Wrap(Failed, "home_failed", "the home failed to start", cause)), 503, "home_failed", 0},
		{"no code", &Error{Kind: Conflict}, 409, "conflict", 0},
		{"plain", cause, 500, "internal", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Classify(tt.err)
			if r.Status != tt.status || r.Code != tt.code || r.RetryAfter != tt.retry {
				t.Fatalf("Classify = %d %s %v, want %d %s %v", r.Status, r.Code, r.RetryAfter, tt.status, tt.code, tt.retry)
			}
			if strings.Contains(r.Message, "/opt/missing") {
				t.Fatalf("public message carries the cause: %q", r.Message)
			}
		})
	}
}

func TestClassifyKeepsCauseForOperators(t *testing.T) {
	r := Classify(Wrap(Failed, "home_failed", "the home failed to start", errors.New("exit status 3")).WithHint("check the command"))
	if r.Cause != "exit status 3" || r.Hint != "check the command" {
		t.Fatalf("cause %q hint %q", r.Cause, r.Hint)
	}
}

func TestKindOf(t *testing.T) {
	if k := KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)); k != Timeout {
		t.Fatalf("deadline: %v", k)
	}
	if !Is(fmt.Errorf("a: %w", New(Busy, "b", "c")), Busy) {
		t.Fatal("wrapped busy not found")
	}
	if Is(nil, Internal) {
		t.Fatal("nil has a kind")
	}
	for k := Internal; k <= NotImplemented; k++ {
		if Status(k) < 400 || k.String() == "unknown" {
			t.Fatalf("kind %d has no status or name", k)
		}
	}
	if Status(Kind(200)) != http.StatusInternalServerError {
		t.Fatal("unknown kind")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}} {
		if got := RetryAfterSeconds(c.d); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// A sentinel gives its kind, code, field and hint to Classify and KindOf
// wherever it sits in the chain; As does not see it, so callers that keep
// errors of a known kind as they are still give it their own meaning. Each
// Classify makes a new *Error: what one caller sets cannot reach the next.
func TestSentinel(t *testing.T) {
	missing := NewSentinel("store: not found", NotFound, "not_found", "no such record").Fielded("id").Hinted("list the records")
	err := fmt.Errorf("read home h1: %w", missing)
	if !errors.Is(err, missing) {
		t.Fatal("errors.Is lost the sentinel")
	}
	if _, ok := As(err); ok {
		t.Error("As found an *Error in a chain that holds only a sentinel")
	}
	if k := KindOf(err); k != NotFound {
		t.Errorf("KindOf = %v, want not_found", k)
	}
	r := Classify(err)
	if r.Status != http.StatusNotFound || r.Code != "not_found" || r.Message != "no such record" ||
		r.Field != "id" || r.Hint != "list the records" || !strings.Contains(r.Cause, "read home h1") {
		t.Errorf("Classify = %+v", r)
	}
	if err.Error() != "read home h1: store: not found" {
		t.Errorf("Error() = %q: the sentinel's text must stay what it was", err.Error())
	}
	// An *Error outside the sentinel wins: it is the caller's meaning.
	outer := Wrap(Failed, "wake_failed", "the home failed to wake", err)
	if r := Classify(outer); r.Code != "wake_failed" {
		t.Errorf("outer *Error lost to the sentinel: %+v", r)
	}
	first := missing.classified(err)
	first.Hint = "changed"
	if r := Classify(err); r.Hint != "list the records" {
		t.Errorf("a caller's change reached the sentinel: hint %q", r.Hint)
	}
	if r := Classify(fmt.Errorf("op: %w", context.DeadlineExceeded)); r.Status != http.StatusGatewayTimeout || r.Code != "timeout" {
		t.Errorf("deadline: %+v", r)
	}
}
