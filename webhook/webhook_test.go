package webhook_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/refresh"
	"github.com/wakegate/wakegate/webhook"
)

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	query  string
}

// receiver is a real HTTP server on loopback that records every request
// and answers with what answer returns for the n-th one (from 1).
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{header: r.Header.Clone(), body: b, query: r.URL.RawQuery})
		n := len(rc.got)
		rc.mu.Unlock()
		w.WriteHeader(answer(n, r))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// waitFor waits until the receiver holds n requests.
func (rc *receiver) waitFor(t *testing.T, n int) []delivery {
	t.Helper()
	testbin.Eventually(t, "the receiver's requests", func() bool { return len(rc.deliveries()) >= n })
	return rc.deliveries()
}

func ok(int, *http.Request) int { return http.StatusOK }

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

// verify checks a delivery's signature with the documented scheme: hex
// HMAC-SHA256 of timestamp "." body, keyed with the secret, behind
// "sha256=".
func verify(t *testing.T, d delivery, key string) {
	t.Helper()
	ts := d.header.Get(webhook.HeaderTimestamp)
	if ts == "" {
		t.Fatalf("no timestamp header: %v", d.header)
	}
	want := "sha256=" + webhook.Sign(key, ts, d.body)
	if got := d.header.Get(webhook.HeaderSignature); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

// Each event is POSTed as JSON with its delivery id, type and timestamp,
// signed when a key is set; a failure's message (its internal cause)
// stays out of the payload.
func TestSignedPayload(t *testing.T) {
	bus := events.NewBus(8)
	rc := newReceiver(t, ok)
	start(t, bus, nil, webhook.Target{URL: rc.srv.URL + "/hook?token=abc", Key: "k3y"})
	bus.Publish(events.Event{Type: events.WakeReady, Home: "h1", Cause: "cold", TotalMS: 12.5})
	bus.Publish(events.Event{Type: events.WakeFailed, Home: "h1", Message: "start /srv/homes/h1/run: exit 1"})
	got := rc.waitFor(t, 2)
	for _, d := range got {
		verify(t, d, "k3y")
		if d.header.Get("Content-Type") != "application/json" || len(d.header.Get(webhook.HeaderDelivery)) != 32 {
			t.Fatalf("headers: %v", d.header)
		}
		if d.query != "token=abc" {
			t.Fatalf("query %q: the URL's query must reach the receiver", d.query)
		}
	}
	var p webhook.Payload
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != events.WakeReady || p.Home != "h1" || p.Cause != "cold" || p.TotalMS != 12.5 || p.Time.IsZero() ||
		p.Instance != "gw-test" || p.ID != got[0].header.Get(webhook.HeaderDelivery) ||
		got[0].header.Get(webhook.HeaderEvent) != events.WakeReady {
		t.Fatalf("payload %s with headers %v", got[0].body, got[0].header)
	}
	if strings.Contains(string(got[1].body), "/srv/homes") || !strings.Contains(string(got[1].body), `"type":"wake.failed"`) {
		t.Fatalf("a failure's payload carries its cause: %s", got[1].body)
	}
}

// A webhook with an event list gets those types only; one without gets
// every type; one without a key is not signed.
func TestEventFilter(t *testing.T) {
	bus := events.NewBus(8)
	some, all := newReceiver(t, ok), newReceiver(t, ok)
	d := start(t, bus, nil, webhook.Target{URL: some.srv.URL, Events: []string{events.Suspend}},
		webhook.Target{URL: all.srv.URL})
	for _, typ := range []string{events.WakeStart, events.WakeReady, events.Suspend} {
		bus.Publish(events.Event{Type: typ, Home: "h1"})
	}
	all.waitFor(t, 3)
	got := some.waitFor(t, 1)
	testbin.Eventually(t, "the counts", func() bool { s := d.Stats(); return s[0].Delivered == 1 && s[1].Delivered == 3 })
	if len(some.deliveries()) != 1 || got[0].header.Get(webhook.HeaderEvent) != events.Suspend {
		t.Fatalf("the filtered webhook got %d deliveries, first %v", len(some.deliveries()), got[0].header)
	}
	if got[0].header.Get(webhook.HeaderSignature) != "" {
		t.Fatal("a webhook without a key signed its delivery")
	}
}

// A 5xx is retried with the same delivery id until a 2xx; a 4xx is not
// retried, and is logged with the URL without its query.
func TestRetries(t *testing.T) {
	bus := events.NewBus(8)
	flaky := newReceiver(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	refusing := newReceiver(t, func(int, *http.Request) int { return http.StatusBadRequest })
	var logs testbin.LogBuffer
	d := start(t, bus, &logs, webhook.Target{URL: flaky.srv.URL, Attempts: 4},
		webhook.Target{URL: refusing.srv.URL + "/in?secret=hush", Attempts: 4})
	bus.Publish(events.Event{Type: events.Suspend, Home: "h1"})
	got := flaky.waitFor(t, 2)
	if got[0].header.Get(webhook.HeaderDelivery) != got[1].header.Get(webhook.HeaderDelivery) {
		t.Fatal("a retry has a new delivery id")
	}
	testbin.Eventually(t, "the counts", func() bool { s := d.Stats(); return s[0].Delivered == 1 && s[1].Failed == 1 })
	// Counted once its delivery gave up: no attempt can follow.
	if n := len(refusing.deliveries()); n != 1 {
		t.Fatalf("a 400 was sent %d times; want once", n)
	}
	if n := len(flaky.deliveries()); n != 2 {
		t.Fatalf("500 then 200: %d attempts; want 2", n)
	}
	log := logs.String()
	if !strings.Contains(log, "delivery failed") || !strings.Contains(log, refusing.srv.URL+"/in") ||
		!strings.Contains(log, "400 Bad Request") || strings.Contains(log, "hush") {
		t.Fatalf("log: %s", log)
	}
}

// A receiver that never answers holds up neither the publisher nor the
// other webhooks; its full queue drops the oldest events and counts them,
// and Close ends the hung attempt.
func TestStalledReceiver(t *testing.T) {
	bus := events.NewBus(8)
	release := make(chan struct{})
	stalled := newReceiver(t, func(_ int, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	defer close(release)
	fine := newReceiver(t, ok)
	var logs testbin.LogBuffer
	d := webhook.Start(bus, webhook.Options{Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Targets: []webhook.Target{
			{URL: stalled.srv.URL, Timeout: time.Minute, Attempts: 1, Queue: 2},
			{URL: fine.srv.URL, Timeout: time.Minute, Attempts: 1, Queue: 16},
		}})
	t.Cleanup(d.Close)
	bus.Publish(events.Event{Type: events.WakeStart, Home: "h1"})
	stalled.waitFor(t, 1) // the worker is now stuck in this attempt
	begin := time.Now()
	for range 10 {
		bus.Publish(events.Event{Type: events.WakeReady, Home: "h1"})
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("publishing took %s behind a stalled receiver", d)
	}
	fine.waitFor(t, 11)
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
