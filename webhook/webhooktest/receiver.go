// Package webhooktest is a webhook receiver for tests: a real HTTP server
// on loopback that records every delivery and answers as the test says,
// and the check of a delivery's signature by the documented scheme
// (docs/webhooks.md).
package webhooktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/webhook"
)

// Delivery is one request a Receiver got.
type Delivery struct {
	Header http.Header
	Body   []byte
	// Query is the request URL's raw query.
	Query string
}

// Receiver records the requests it gets and answers each with the status
// its answer function returns for it.
type Receiver struct {
	// URL is the receiver's base URL, http://127.0.0.1:port.
	URL    string
	srv    *httptest.Server
	answer func(n int, r *http.Request) int
	mu     sync.Mutex
	got    []Delivery
}

// OK answers every request 200.
func OK(int, *http.Request) int { return http.StatusOK }

// Always answers every request with status.
func Always(status int) func(int, *http.Request) int {
	return func(int, *http.Request) int { return status }
}

// FirstThen answers the first request with first and every later one
// with then.
func FirstThen(first, then int) func(int, *http.Request) int {
	return func(n int, _ *http.Request) int {
		if n == 1 {
			return first
		}
		return then
	}
}

// Hang answers no request: it waits until the sender gives up (its
// timeout, or the dispatcher's Close), like a receiver that stalled.
func Hang(_ int, r *http.Request) int {
	<-r.Context().Done()
	return http.StatusServiceUnavailable
}

// New starts a receiver, closed when the test ends; answer is given the
// request's number (from 1) and the request, and may block until the
// request's context ends to stand for a receiver that hangs.
func New(t testing.TB, answer func(n int, r *http.Request) int) *Receiver {
	t.Helper()
	rc := &Receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	rc.URL = rc.srv.URL
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, Delivery{Header: r.Header.Clone(), Body: b, Query: r.URL.RawQuery})
	n := len(rc.got)
	rc.mu.Unlock()
	w.WriteHeader(rc.answer(n, r))
}

// Deliveries returns the requests received so far, in order.
func (rc *Receiver) Deliveries() []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Delivery(nil), rc.got...)
}

// Types returns the event type (webhook.HeaderEvent) of each request
// received so far, in order.
func (rc *Receiver) Types() []string {
	var out []string
	for _, d := range rc.Deliveries() {
		out = append(out, d.Header.Get(webhook.HeaderEvent))
	}
	return out
}

// WaitFor waits until the receiver holds n requests and returns them.
func (rc *Receiver) WaitFor(t testing.TB, n int) []Delivery {
	t.Helper()
	testbin.Eventually(t, fmt.Sprintf("%d requests at the receiver", n), func() bool { return len(rc.Deliveries()) >= n })
	return rc.Deliveries()
}

// Verify checks d's signature as docs/webhooks.md tells a receiver to:
// "sha256=" and the hex HMAC-SHA256, keyed with key, of the timestamp
// header, a dot and the body, computed here from scratch.
func Verify(d Delivery, key string) error {
	ts := d.Header.Get(webhook.HeaderTimestamp)
	if ts == "" {
		return fmt.Errorf("no %s header", webhook.HeaderTimestamp)
	}
	want := "sha256=" + hmacHex(key, ts+"."+string(d.Body))
	if got := d.Header.Get(webhook.HeaderSignature); got != want {
		return fmt.Errorf("signature %q, want %q", got, want)
	}
	return nil
}

// hmacHex is the hex HMAC-SHA256 of msg keyed with key.
func hmacHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}
