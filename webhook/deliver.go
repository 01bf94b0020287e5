package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/events"
)

// The headers of every delivery (docs/webhooks.md).
const (
	// HeaderDelivery is the delivery's id, the same on every attempt, so
	// that a receiver can tell a retry from a new event.
	HeaderDelivery = "X-Wakegate-Delivery"
	// HeaderEvent is the event's type.
	HeaderEvent = "X-Wakegate-Event"
	// HeaderTimestamp is the attempt's time, in Unix seconds; it is part
	// of the signed text.
	HeaderTimestamp = "X-Wakegate-Timestamp"
	// HeaderSignature is "sha256=" and Sign's hex digest; only with a
	// secret.
	HeaderSignature = "X-Wakegate-Signature"
)

// maxBackoff caps the pause between two attempts.
const maxBackoff = time.Minute

// Payload is the JSON body of a delivery: the delivery's id, the
// gateway's instance and the event's fields (type, time, home, app and
// what else the type carries), without the message of a failure event.
type Payload struct {
	// ID is the delivery's id (HeaderDelivery).
	ID string `json:"id"`
	// Instance is the gateway that saw the event.
	Instance string `json:"instance"`
	events.Event
}

// causeInMessage are the event types whose message is the error as the
// operator's log has it (paths, commands, addresses): a payload leaves it
// out.
var causeInMessage = map[string]bool{
	events.WakeFailed: true, events.HomeFailed: true,
	events.RollRolledBack: true, events.RollIncident: true,
}

// Sign returns the hex HMAC-SHA256, keyed with key, of the timestamp (as
// sent in HeaderTimestamp), a dot and the body: the signature a receiver
// recomputes to verify a delivery.
func Sign(key, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// deliver sends ev to the webhook, with retries, and counts the outcome;
// it returns early, uncounted, when ctx ends.
func (h *hook) deliver(ctx context.Context, ev events.Event) {
	if causeInMessage[ev.Type] {
		ev.Message = ""
	}
	id := newID()
	body, err := json.Marshal(Payload{ID: id, Instance: h.o.Instance, Event: ev})
	if err != nil {
		h.fail(ev.Type, id, 0, fmt.Errorf("encode the event: %w", err))
		return
	}
	pause := h.o.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := h.attempt(ctx, ev.Type, id, body)
		if err == nil {
			h.delivered.Add(1)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if !retry || attempt >= h.t.Attempts {
			h.fail(ev.Type, id, attempt, err)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, maxBackoff)
	}
}

// attempt POSTs body once. A nil error is a 2xx answer; retry says a
// failure may pass on a later attempt (a 5xx or a network error).
func (h *hook) attempt(ctx context.Context, typ, id string, body []byte) (retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, h.t.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, h.t.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("build the request: %w", unwrapURL(err))
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "wakegate-webhook")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderEvent, typ)
	req.Header.Set(HeaderTimestamp, ts)
	if h.t.Key != "" {
		req.Header.Set(HeaderSignature, "sha256="+Sign(h.t.Key, ts, body))
	}
	res, err := h.d.client.Do(req)
	if err != nil {
		if errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return true, fmt.Errorf("no answer within %s", h.t.Timeout)
		}
		return true, unwrapURL(err)
	}
	// Read a little of the answer so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	_ = res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return false, nil
	case res.StatusCode >= 500:
		return true, fmt.Errorf("the receiver answered %s", res.Status)
	}
	return false, fmt.Errorf("the receiver answered %s (not retried)", res.Status)
}

// fail counts a failed delivery and logs it with the webhook's URL
// without its query.
func (h *hook) fail(typ, id string, attempts int, err error) {
	h.failed.Add(1)
	h.o.Log.Warn("webhook: delivery failed", "webhook", h.redacted, "event", typ, "delivery", id,
		"attempts", attempts, "err", err.Error())
}

// unwrapURL drops the *url.Error around err, whose text repeats the URL
// with its query.
func unwrapURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// newID returns a random delivery id, 32 hex digits.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
