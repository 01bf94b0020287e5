package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/webhook"
	"github.com/wakegate/wakegate/webhook/webhooktest"
)

// A real gateway with a real exec home posts the wake and the suspend of
// its home to each webhook that lists them, signed with the documented
// scheme; a 500 is retried, a 400 is not; a receiver that hangs holds up
// no wake, and its full queue drops events and counts them.
func TestWebhooksOnWakeAndSuspend(t *testing.T) {
	t.Setenv("WAKEGATE_E2E_HOOK_SECRET", "hook-s3cret")
	signed := webhooktest.New(t, webhooktest.OK)
	flaky := webhooktest.New(t, webhooktest.FirstThen(http.StatusInternalServerError, http.StatusOK))
	refusing := webhooktest.New(t, webhooktest.Always(http.StatusBadRequest))
	stalled := webhooktest.New(t, webhooktest.Hang)

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
`, signed.URL, flaky.URL, refusing.URL, stalled.URL)})

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

	testbin.Eventually(t, "the signed webhook's three events", func() bool { return len(signed.Types()) >= 3 })
	if got := strings.Join(signed.Types(), " "); got != "wake.start wake.ready suspend" {
		t.Fatalf("the signed webhook got %q; want wake.start wake.ready suspend", got)
	}
	for _, d := range signed.Deliveries() {
		if err := webhooktest.Verify(d, "hook-s3cret"); err != nil {
			t.Fatal(err)
		}
		var p webhook.Payload
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Home != wkHome || p.Instance != "e2e" || p.ID != d.Header.Get(webhook.HeaderDelivery) || p.Time.IsZero() {
			t.Fatalf("payload %s", d.Body)
		}
		if strings.Contains(string(d.Body), gw.data) {
			t.Fatalf("a payload names the data folder: %s", d.Body)
		}
	}

	testbin.Eventually(t, "the counts", func() bool {
		s := gw.g.Webhooks()
		return len(s) == 4 && s[0].Delivered == 3 && s[1].Delivered == 1 && s[2].Failed == 1 && s[3].Dropped > 0
	})
	s := gw.g.Webhooks()
	if f := flaky.Deliveries(); len(f) != 2 || f[0].Header.Get(webhook.HeaderDelivery) != f[1].Header.Get(webhook.HeaderDelivery) {
		t.Fatalf("500 then 200: %d attempts; want 2 with one delivery id", len(f))
	}
	if r := refusing.Types(); len(r) != 1 || r[0] != events.Suspend {
		t.Fatalf("the refusing webhook got %v; want one suspend, not retried", r)
	}
	if strings.Contains(gw.logs.String(), "t0k") {
		t.Fatal("the log shows a webhook URL's query")
	}
	if !strings.Contains(gw.logs.String(), refusing.URL+"/refusing") {
		t.Fatalf("no log line names the refusing webhook:\n%s", gw.logs)
	}
	// The stalled webhook holds wake.start in its one attempt, one event
	// in its queue, and dropped the rest of the wake's and the suspend's.
	if len(stalled.Types()) != 1 || s[3].Dropped == 0 || s[3].Delivered != 0 {
		t.Fatalf("stalled webhook: %d requests, counts %+v; want 1 request and drops", len(stalled.Types()), s[3])
	}
}
