package httpprov

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder keeps a copy of every request a client sends.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
	next http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.reqs, r.body = append(r.reqs, req.Clone(req.Context())), append(r.body, b)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// A request the client really sent, sent again byte for byte, is refused
// as a replay, and nothing is woken twice.
func TestReplayRefused(t *testing.T) {
	cp := newControlPlane(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rec := &recorder{next: tr}
	p := newClient(t, cp.base, func(c *Config) { c.Client = &http.Client{Transport: rec} })
	if _, err := p.Wake(ctxFor(t, 10*time.Second), alice); err != nil {
		t.Fatal(err)
	}
	cp.setState("alice", "stopped") // so a replayed wake would start it again
	orig := rec.reqs[0]
	again, err := http.NewRequest(orig.Method, orig.URL.String(), bytes.NewReader(rec.body[0]))
	if err != nil {
		t.Fatal(err)
	}
	again.Header = orig.Header.Clone()
	res, err := (&http.Client{Transport: tr}).Do(again)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a Answer
	_ = json.NewDecoder(res.Body).Decode(&a)
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(a.Reason, ErrReplayed.Error()) {
		t.Fatalf("replay answered %d %+v, want 401 naming the replay", res.StatusCode, a)
	}
	if n := cp.wakes("alice"); n != 1 {
		t.Fatalf("home started %d times, want 1", n)
	}
}

// The verifier refuses each way a request can be forged or stale, and
// accepts the genuine one once.
func TestVerifier(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"alice","target":"alice"}`)
	sign := func(at time.Time, secret []byte) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/homes/alice/wake", bytes.NewReader(body))
		r.Header.Set(HeaderIdempotencyKey, "wake-1")
		if err := Sign(r, body, secret, at); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		want   error
		replay bool
	}{
		{"genuine", func() *http.Request { return sign(now, testSecret) }, nil, false},
		{"replayed", func() *http.Request { return sign(now, testSecret) }, ErrReplayed, true},
		{"unsigned", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/homes/alice/wake", bytes.NewReader(body))
		}, ErrUnsigned, false},
		{"wrong secret", func() *http.Request { return sign(now, []byte("not-the-secret-at-all")) }, ErrBadSignature, false},
		{"stale", func() *http.Request { return sign(now.Add(-2*time.Minute), testSecret) }, ErrStale, false},
		{"from the future", func() *http.Request { return sign(now.Add(2*time.Minute), testSecret) }, ErrStale, false},
		{"other body", func() *http.Request {
			r := sign(now, testSecret)
			r.Body = io.NopCloser(strings.NewReader(`{"id":"bob","target":"bob"}`))
			return r
		}, ErrBadSignature, false},
		{"other path", func() *http.Request {
			r := sign(now, testSecret)
			r.RequestURI = "/homes/bob/wake"
			return r
		}, ErrBadSignature, false},
		{"other method", func() *http.Request {
			r := sign(now, testSecret)
			r.Method = http.MethodPut
			return r
		}, ErrBadSignature, false},
		{"other idempotency key", func() *http.Request {
			r := sign(now, testSecret)
			r.Header.Set(HeaderIdempotencyKey, "wake-2")
			return r
		}, ErrBadSignature, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewVerifier(testSecret, time.Minute, func() time.Time { return now })
			r := tc.req()
			if tc.replay {
				first := r.Clone(r.Context())
				first.Body = io.NopCloser(bytes.NewReader(body))
				if _, err := v.Verify(first); err != nil {
					t.Fatalf("first sending: %v", err)
				}
			}
			got, err := v.Verify(r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err == nil && !bytes.Equal(got, body) {
				t.Fatalf("Verify body = %q, want %q", got, body)
			}
		})
	}
}

// A nonce is forgotten once a request carrying it could no longer pass
// the timestamp check, so the verifier's memory stays bounded.
func TestVerifierForgets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := now
	v := NewVerifier(testSecret, time.Minute, func() time.Time { return clock })
	for i := 0; i < 3; i++ {
		r := httptest.NewRequest(http.MethodGet, "/homes/alice", nil)
		if err := Sign(r, nil, testSecret, clock); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(r); err != nil {
			t.Fatal(err)
		}
	}
	clock = now.Add(3 * time.Minute)
	r := httptest.NewRequest(http.MethodGet, "/homes/alice", nil)
	if err := Sign(r, nil, testSecret, clock); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	n := len(v.seen)
	v.mu.Unlock()
	if n != 1 {
		t.Fatalf("verifier remembers %d nonces, want 1", n)
	}
}
