package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/internal/provconf"
)

// WebhookConfig is one receiver of lifecycle events: each event of the
// listed types is POSTed to URL as JSON, signed when a secret is set
// (docs/webhooks.md has the payload, the headers and the signature
// scheme). The webhooks section is restart-only: a reload keeps the
// running list until the next start.
type WebhookConfig struct {
	// URL receives the events: an absolute http:// or https:// URL with a
	// host. Required. Logs name it without its query.
	URL string `yaml:"url"`
	// Events are the event types delivered: wake.start, wake.ready,
	// wake.failed, suspend, home.failed, roll.start, roll.done,
	// roll.rolled_back, roll.incident, app.phase, app.registered,
	// app.removed, route.published, route.unpublished, home.refreshed,
	// certificate.obtained. Default (and when empty): every type.
	Events []string `yaml:"events"`
	// Secret is a secret reference, "env:NAME" or "file:PATH", whose value
	// signs each delivery with HMAC-SHA256 (header
	// X-Wakegate-Signature). Default "": deliveries are not signed.
	Secret string `yaml:"secret"`
	// Timeout bounds one delivery attempt, connection to response
	// headers and body. Default 5s; zero means the default.
	Timeout time.Duration `yaml:"timeout"`
	// Attempts is how many times an event is sent when the receiver
	// answers 5xx or cannot be reached, the first included, with a
	// backoff doubling from 500ms between them; a 4xx (or any other
	// status below 200 or from 300) is never retried. Default 4; zero
	// means the default.
	Attempts int `yaml:"attempts"`
	// Queue is how many events wait for this receiver, in events; past
	// it the oldest waiting event is dropped and counted, so that a slow
	// receiver never holds up a wake. Default 256; zero means the
	// default.
	Queue int `yaml:"queue"`

	key string // Secret, resolved by the checks
}

// SigningKey is the resolved Secret; "" when none is set.
func (w *WebhookConfig) SigningKey() string { return w.key }

func (w *WebhookConfig) defaults() {
	def(&w.Timeout, 5*time.Second)
	def(&w.Attempts, 4)
	def(&w.Queue, 256)
}

func validateWebhooks(k checker, hooks []WebhookConfig) {
	for i := range hooks {
		hooks[i].validate(k.in(fmt.Sprintf("webhooks[%d]", i)))
	}
}

func (w *WebhookConfig) validate(k checker) {
	switch u, err := url.Parse(w.URL); {
	case w.URL == "":
		k.bad("url", "required: the http:// or https:// URL that receives the events")
	case err != nil:
		k.bad("url", "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		k.bad("url", "want an http:// or https:// URL, got scheme %q", u.Scheme)
	case u.Host == "":
		k.bad("url", "names no host")
	}
	for i, name := range w.Events {
		if !slices.Contains(events.Types, name) {
			k.bad(fmt.Sprintf("events[%d]", i), "unknown event type %q; want one of %s", name,
				strings.Join(events.Types, ", "))
		}
	}
	if w.Secret != "" {
		key, err := provconf.ResolveSecret(w.Secret)
		if err != nil {
			k.bad("secret", "%v", err)
		}
		w.key = key
	}
	k.nonNegative(namedDuration{"timeout", w.Timeout})
	if w.Attempts < 0 {
		k.bad("attempts", "must not be negative, got %d", w.Attempts)
	}
	if w.Queue < 0 {
		k.bad("queue", "must not be negative, got %d", w.Queue)
	}
}
