// Package webhook posts the gateway's lifecycle events to the operator's
// receivers: a Dispatcher subscribes to the event bus (package events)
// and hands each event whose type a webhook lists to that webhook's
// bounded queue; one worker per webhook POSTs them in order as JSON,
// signed with HMAC-SHA256 when the webhook has a secret (Sign;
// docs/webhooks.md has the payload, the headers and how to verify).
//
// Delivery never holds up what it reports: the bus drops for a slow
// subscriber rather than block its publisher, and the dispatcher's own
// subscriber only copies into the queues, each of which drops its oldest
// event when full and counts it. An attempt that the receiver answers
// with 5xx, or that fails on the network, is repeated with a doubling
// backoff up to the webhook's attempts; any other answer outside 2xx
// (a 4xx, a redirect) fails the delivery at once. Every failed delivery
// is logged with the webhook's URL without its query, and counted.
//
// It holds no DESIGN rule of its own. It keeps two of the code's habits:
// every goroutine has an owner (the fan-out and each worker stop and are
// waited for in Close, and every backoff timer is stopped on every return
// path), and counts are made where they happen (deliveries, failures and
// drops, with atomics the metrics read), never from the bus. A payload
// carries no internal cause: the message of a failure event, which holds
// the error as the log has it, stays in the log (rule 23's spirit for a
// reader outside the gateway).
package webhook
