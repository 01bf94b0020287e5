package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/events"
)

// busBuffer is the dispatcher's subscription buffer on the bus, in
// events: the fan-out only copies into queues, so it rarely holds more
// than one.
const busBuffer = 1024

// defaultTimeout bounds an attempt of a Target that sets no timeout
// (config.WebhookConfig's default).
const defaultTimeout = 5 * time.Second

// Target is one webhook, its defaults filled (config.WebhookConfig).
type Target struct {
	// URL receives the events.
	URL string
	// Events are the types delivered; empty for every type.
	Events []string
	// Key signs the deliveries; "" for unsigned ones.
	Key string
	// Timeout bounds one attempt (zero: 5s); Attempts is how many are
	// made at most (at least 1); Queue is how many events may wait (at
	// least 1).
	Timeout  time.Duration
	Attempts int
	Queue    int
}

// Options configure a Dispatcher.
type Options struct {
	Targets []Target
	// Instance names this gateway in every payload.
	Instance string
	// Log receives a line for every failed delivery and for a queue that
	// starts to drop.
	Log *slog.Logger
	// Backoff is the pause before the second attempt, doubled before each
	// next one up to a minute. Zero means 500ms.
	Backoff time.Duration
}

// Stats are one webhook's counts since Start.
type Stats struct {
	// URL is the webhook's URL without its query (Redact).
	URL string
	// Delivered events were answered 2xx; Failed ones ran out of
	// attempts or were refused; Dropped ones were pushed out of a full
	// queue before they were sent.
	Delivered, Failed, Dropped uint64
}

// Dispatcher delivers the bus's events to the webhooks. Its methods are
// safe on a nil Dispatcher (no webhooks).
type Dispatcher struct {
	hooks  []*hook
	sub    *events.Subscription
	cancel context.CancelFunc
	wg     sync.WaitGroup
	client *http.Client
}

// hook is one webhook's queue, worker and counts.
type hook struct {
	t        Target
	redacted string
	q        *queue
	d        *Dispatcher
	o        *Options

	delivered, failed, dropped atomic.Uint64
}

// Start subscribes to bus and starts one worker per target; it returns
// nil when there is none. Close stops it.
func Start(bus *events.Bus, o Options) *Dispatcher {
	if len(o.Targets) == 0 || bus == nil {
		return nil
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1 // one worker per webhook
	d := &Dispatcher{client: &http.Client{Transport: tr,
		// A redirect is an answer outside 2xx, never followed: a
		// receiver that moved is told by a failed delivery.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, t := range o.Targets {
		h := &hook{t: t, redacted: Redact(t.URL), q: newQueue(max(t.Queue, 1)), d: d, o: &o}
		h.t.Attempts = max(t.Attempts, 1)
		if h.t.Timeout <= 0 {
			h.t.Timeout = defaultTimeout
		}
		d.hooks = append(d.hooks, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.sub = bus.Subscribe(busBuffer)
	d.wg.Add(1 + len(d.hooks))
	go d.fanOut(ctx)
	for _, h := range d.hooks {
		go h.work(ctx)
	}
	return d
}

// fanOut copies each event of the subscription into the queue of every
// webhook that lists its type, until ctx ends.
func (d *Dispatcher) fanOut(ctx context.Context) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-d.sub.C:
			for _, h := range d.hooks {
				if len(h.t.Events) == 0 || slices.Contains(h.t.Events, ev.Type) {
					h.push(ev)
				}
			}
		}
	}
}

// push queues ev, dropping the oldest waiting event when the queue is
// full; the first drop after the queue was last empty is logged.
func (h *hook) push(ev events.Event) {
	dropped, first := h.q.push(ev)
	if !dropped {
		return
	}
	h.dropped.Add(1)
	if first {
		h.o.Log.Warn("webhook: the receiver falls behind; dropping the oldest waiting events",
			"webhook", h.redacted, "queue", h.q.size())
	}
}

// work delivers the queued events one at a time, in order, until ctx
// ends.
func (h *hook) work(ctx context.Context) {
	defer h.d.wg.Done()
	for {
		ev, ok := h.q.pop()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-h.q.ready:
			}
			continue
		}
		h.deliver(ctx, ev)
		if ctx.Err() != nil {
			return
		}
	}
}

// Close stops the fan-out and the workers and waits for them; a delivery
// in flight is abandoned, and queued events are not sent.
func (d *Dispatcher) Close() {
	if d == nil {
		return
	}
	d.cancel()
	d.wg.Wait()
	d.sub.Close()
	d.client.CloseIdleConnections()
}

// Stats returns each webhook's counts, in the order of the targets.
func (d *Dispatcher) Stats() []Stats {
	if d == nil {
		return nil
	}
	out := make([]Stats, len(d.hooks))
	for i, h := range d.hooks {
		out[i] = Stats{URL: h.redacted, Delivered: h.delivered.Load(), Failed: h.failed.Load(), Dropped: h.dropped.Load()}
	}
	return out
}

// Collectors are the dispatcher's metrics: wakegate_webhook_events_total
// by result (delivered, failed, dropped), over every webhook, read from
// the counts when scraped. No label names a webhook.
func (d *Dispatcher) Collectors() []prometheus.Collector {
	if d == nil {
		return nil
	}
	sum := func(count func(*hook) *atomic.Uint64) func() float64 {
		return func() float64 {
			var n uint64
			for _, h := range d.hooks {
				n += count(h).Load()
			}
			return float64(n)
		}
	}
	results := []struct {
		name  string
		count func(*hook) *atomic.Uint64
	}{
		{"delivered", func(h *hook) *atomic.Uint64 { return &h.delivered }},
		{"failed", func(h *hook) *atomic.Uint64 { return &h.failed }},
		{"dropped", func(h *hook) *atomic.Uint64 { return &h.dropped }},
	}
	out := make([]prometheus.Collector, 0, len(results))
	for _, r := range results {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "wakegate_webhook_events_total",
			Help:        "Events for webhooks by result: delivered (2xx), failed (refused or out of attempts), dropped (pushed out of a full queue).",
			ConstLabels: prometheus.Labels{"result": r.name},
		}, sum(r.count)))
	}
	return out
}

// Redact returns raw without its query, fragment and user info, as logs
// and stats name a webhook: a query or user info may hold a token.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
