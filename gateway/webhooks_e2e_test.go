package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/webhook"
)

// hookReceiver is a webhook receiver on loopback: it records every
// request and answers with what its answer function says for the n-th
// one (from 1).
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hookDelivery
	answer func(n int, r *http.Request) int
}

// hookDelivery is one request a receiver got.
type hookDelivery struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T, answer func(n int, r *http.Request) int) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, hookDelivery{header: r.Header.Clone(), body: b})
		n := len(rc.got)
		rc.mu.Unlock()
		w.WriteHeader(rc.answer(n, r))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// types are the event types the receiver got, in order.
func (rc *hookReceiver) types() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]string, len(rc.got))
	for i, d := range rc.got {
		out[i] = d.header.Get(webhook.HeaderEvent)
	}
	return out
}

func (rc *hookReceiver) deliveries() []hookDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookDelivery(nil), rc.got...)
}

// A real gateway with a real exec home posts the wake and the suspend of
// its home to each webhook that lists them, signed with the documented
// scheme; a 500 is retried, a 400 is not; a receiver that hangs holds up
// no wake, and its full queue drops events and counts them.
func TestWebhooksOnWakeAndSuspend(t *testing.T) {
	t.Setenv("WAKEGATE_E2E_HOOK_SECRET", "hook-s3cret")
	ok := func(int, *http.Request) int { return http.StatusOK }
	signed := newHookReceiver(t, ok)
	flaky := newHookReceiver(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	refusing := newHookReceiver(t, func(int, *http.Request) int { return http.StatusBadRequest })
	release := make(chan struct{})
	stalled := newHookReceiver(t, func(_ int, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	defer close(release)

	gw := wkStart(t, wkOptions{extra: fmt.Sprintf(`webhooks:
  - url: %s/signed?token=t0k
    events: [wake.start, wake.ready, suspend]
    secret: env:WAKEGATE_E2E_HOOK_SECRET
  - url: %s/flaky
    events: [wake.ready]
  - url: %s/refusing
    events: [suspend]
  - url: %s/stalled
    timeout: 1m
    attempts: 1
    queue: 1
`, signed.srv.URL, flaky.srv.URL, refusing.srv.URL, stalled.srv.URL)})

	// The stalled receiver hangs on the first event from here on; the
	// wake still completes.
	begin := time.Now()
	gw.mustOK(wkWhoami, nil)
	if d := time.Since(begin); d > 15*time.Second {
		t.Fatalf("the wake took %s behind a hung webhook", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	if err := gw.g.Engine().Suspend(ctx, wkHome); err != nil {
		t.Fatalf("suspend: %v", err)
	}

	testbin.Eventually(t, "the signed webhook's three events", func() bool { return len(signed.types()) >= 3 })
	if got := strings.Join(signed.types(), " "); got != "wake.start wake.ready suspend" {
		t.Fatalf("the signed webhook got %q; want wake.start wake.ready suspend", got)
	}
	for _, d := range signed.deliveries() {
		ts := d.header.Get(webhook.HeaderTimestamp)
		want := "sha256=" + webhook.Sign("hook-s3cret", ts, d.body)
		if ts == "" || d.header.Get(webhook.HeaderSignature) != want {
			t.Fatalf("signature %q over timestamp %q; want %q", d.header.Get(webhook.HeaderSignature), ts, want)
		}
		var p webhook.Payload
		if err := json.Unmarshal(d.body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Home != wkHome || p.Instance != "e2e" || p.ID != d.header.Get(webhook.HeaderDelivery) || p.Time.IsZero() {
			t.Fatalf("payload %s", d.body)
		}
		if strings.Contains(string(d.body), gw.data) {
			t.Fatalf("a payload names the data folder: %s", d.body)
		}
	}

	testbin.Eventually(t, "the counts", func() bool {
		s := gw.g.Webhooks()
		return len(s) == 4 && s[0].Delivered == 3 && s[1].Delivered == 1 && s[2].Failed == 1 && s[3].Dropped > 0
	})
	s := gw.g.Webhooks()
	if f := flaky.deliveries(); len(f) != 2 || f[0].header.Get(webhook.HeaderDelivery) != f[1].header.Get(webhook.HeaderDelivery) {
		t.Fatalf("500 then 200: %d attempts; want 2 with one delivery id", len(f))
	}
	if r := refusing.types(); len(r) != 1 || r[0] != events.Suspend {
		t.Fatalf("the refusing webhook got %v; want one suspend, not retried", r)
	}
	if strings.Contains(gw.logs.String(), "t0k") {
		t.Fatal("the log shows a webhook URL's query")
	}
	if !strings.Contains(gw.logs.String(), refusing.srv.URL+"/refusing") {
		t.Fatalf("no log line names the refusing webhook:\n%s", gw.logs)
	}
	// The stalled webhook holds wake.start in its one attempt, one event
	// in its queue, and dropped the rest of the wake's and the suspend's.
	if len(stalled.types()) != 1 || s[3].Dropped == 0 || s[3].Delivered != 0 {
		t.Fatalf("stalled webhook: %d requests, counts %+v; want 1 request and drops", len(stalled.types()), s[3])
	}
}
