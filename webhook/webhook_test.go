package webhook_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/webhook"
	"github.com/wakegate/wakegate/webhook/webhooktest"
)

// start runs a dispatcher over bus with targets, stopped at the end of the
// test, logging into logs.
func start(t *testing.T, bus *events.Bus, logs *testbin.LogBuffer, targets ...webhook.Target) *webhook.Dispatcher {
	t.Helper()
	for i := range targets {
		targets[i].Timeout = max(targets[i].Timeout, 5*time.Second)
		targets[i].Attempts = max(targets[i].Attempts, 1)
		targets[i].Queue = max(targets[i].Queue, 16)
	}
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	d := webhook.Start(bus, webhook.Options{Targets: targets, Instance: "gw-test", Log: log, Backoff: 20 * time.Millisecond})
	t.Cleanup(d.Close)
	return d
}

// verify fails the test unless d is signed with key by the documented
// scheme.
func verify(t *testing.T, d webhooktest.Delivery, key string) {
	t.Helper()
	if err := webhooktest.Verify(d, key); err != nil {
		t.Fatal(err)
	}
}

// Each event is POSTed as JSON with its delivery id, type and timestamp,
// signed when a key is set; a failure's message (its internal cause)
// stays out of the payload.
func TestSignedPayload(t *testing.T) {
	bus := events.NewBus(8)
	rc := webhooktest.New(t, webhooktest.OK)
	start(t, bus, nil, webhook.Target{URL: rc.URL + "/hook?token=abc", Key: "k3y"})
	bus.Publish(events.Event{Type: events.WakeReady, Home: "h1", Cause: "cold", TotalMS: 12.5})
	bus.Publish(events.Event{Type: events.WakeFailed, Home: "h1", Message: "start /srv/homes/h1/run: exit 1"})
	got := rc.WaitFor(t, 2)
	for _, d := range got {
		verify(t, d, "k3y")
		if d.Header.Get("Content-Type") != "application/json" || len(d.Header.Get(webhook.HeaderDelivery)) != 32 {
			t.Fatalf("headers: %v", d.Header)
		}
		if d.Query != "token=abc" {
			t.Fatalf("query %q: the URL's query must reach the receiver", d.Query)
		}
	}
	var p webhook.Payload
	if err := json.Unmarshal(got[0].Body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != events.WakeReady || p.Home != "h1" || p.Cause != "cold" || p.TotalMS != 12.5 || p.Time.IsZero() ||
		p.Instance != "gw-test" || p.ID != got[0].Header.Get(webhook.HeaderDelivery) ||
		got[0].Header.Get(webhook.HeaderEvent) != events.WakeReady {
		t.Fatalf("payload %s with headers %v", got[0].Body, got[0].Header)
	}
	if strings.Contains(string(got[1].Body), "/srv/homes") || !strings.Contains(string(got[1].Body), `"type":"wake.failed"`) {
		t.Fatalf("a failure's payload carries its cause: %s", got[1].Body)
	}
}

// A webhook with an event list gets those types only; one without gets
// every type; one without a key is not signed.
func TestEventFilter(t *testing.T) {
	bus := events.NewBus(8)
	some, all := webhooktest.New(t, webhooktest.OK), webhooktest.New(t, webhooktest.OK)
	d := start(t, bus, nil, webhook.Target{URL: some.URL, Events: []string{events.Suspend}},
		webhook.Target{URL: all.URL})
	for _, typ := range []string{events.WakeStart, events.WakeReady, events.Suspend} {
		bus.Publish(events.Event{Type: typ, Home: "h1"})
	}
	all.WaitFor(t, 3)
	got := some.WaitFor(t, 1)
	testbin.Eventually(t, "the counts", func() bool { s := d.Stats(); return s[0].Delivered == 1 && s[1].Delivered == 3 })
	if len(some.Deliveries()) != 1 || got[0].Header.Get(webhook.HeaderEvent) != events.Suspend {
		t.Fatalf("the filtered webhook got %d deliveries, first %v", len(some.Deliveries()), got[0].Header)
	}
	if got[0].Header.Get(webhook.HeaderSignature) != "" {
		t.Fatal("a webhook without a key signed its delivery")
	}
}

// A 5xx is retried with the same delivery id until a 2xx; a 4xx is not
// retried, and is logged with the URL without its query.
func TestRetries(t *testing.T) {
	bus := events.NewBus(8)
	flaky := webhooktest.New(t, webhooktest.FirstThen(http.StatusInternalServerError, http.StatusOK))
	refusing := webhooktest.New(t, webhooktest.Always(http.StatusBadRequest))
	var logs testbin.LogBuffer
	d := start(t, bus, &logs, webhook.Target{URL: flaky.URL, Attempts: 4},
		webhook.Target{URL: refusing.URL + "/in?secret=hush", Attempts: 4})
	bus.Publish(events.Event{Type: events.Suspend, Home: "h1"})
	got := flaky.WaitFor(t, 2)
	if got[0].Header.Get(webhook.HeaderDelivery) != got[1].Header.Get(webhook.HeaderDelivery) {
		t.Fatal("a retry has a new delivery id")
	}
	testbin.Eventually(t, "the counts", func() bool { s := d.Stats(); return s[0].Delivered == 1 && s[1].Failed == 1 })
	// Counted once its delivery gave up: no attempt can follow.
	if n := len(refusing.Deliveries()); n != 1 {
		t.Fatalf("a 400 was sent %d times; want once", n)
	}
	if n := len(flaky.Deliveries()); n != 2 {
		t.Fatalf("500 then 200: %d attempts; want 2", n)
	}
	log := logs.String()
	if !strings.Contains(log, "delivery failed") || !strings.Contains(log, refusing.URL+"/in") ||
		!strings.Contains(log, "400 Bad Request") || strings.Contains(log, "hush") {
		t.Fatalf("log: %s", log)
	}
}

// A receiver that never answers holds up neither the publisher nor the
// other webhooks; its full queue drops the oldest events and counts them,
// and Close ends the hung attempt.
func TestStalledReceiver(t *testing.T) {
	bus := events.NewBus(8)
	stalled := webhooktest.New(t, webhooktest.Hang)
	fine := webhooktest.New(t, webhooktest.OK)
	var logs testbin.LogBuffer
	d := webhook.Start(bus, webhook.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Targets: []webhook.Target{
			{URL: stalled.URL, Timeout: time.Minute, Attempts: 1, Queue: 2},
			{URL: fine.URL, Timeout: time.Minute, Attempts: 1, Queue: 16},
		}})
	t.Cleanup(d.Close)
	bus.Publish(events.Event{Type: events.WakeStart, Home: "h1"})
	stalled.WaitFor(t, 1) // the worker is now stuck in this attempt
	begin := time.Now()
	for range 10 {
		bus.Publish(events.Event{Type: events.WakeReady, Home: "h1"})
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("publishing took %s behind a stalled receiver", d)
	}
	fine.WaitFor(t, 11)
	testbin.Eventually(t, "the drops", func() bool { return d.Stats()[0].Dropped == 8 })
	if !strings.Contains(logs.String(), "falls behind") {
		t.Fatalf("no log line for the drops: %s", logs.String())
	}
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the hung attempt")
	}
	if s := d.Stats()[0]; s.Delivered != 0 || s.Failed != 0 {
		t.Fatalf("an abandoned attempt was counted: %+v", s)
	}
}

// Every event type a webhook may list is in events.Types, those published
// outside package events included.
func TestTypesNameEveryPublisher(t *testing.T) {
	for _, typ := range []string{refresh.Event, events.CertObtained, events.WakeStart} {
		found := false
		for _, known := range events.Types {
			found = found || known == typ
		}
		if !found {
			t.Errorf("events.Types lacks %q", typ)
		}
	}
}

// Redact keeps scheme, host and path.
func TestRedact(t *testing.T) {
	if got := webhook.Redact("https://u:p@hooks.example:8443/in/x?token=t#f"); got != "https://hooks.example:8443/in/x" {
		t.Fatalf("Redact = %q", got)
	}
}
