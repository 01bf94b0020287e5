// Package events is the gateway's record of what happens to homes and
// apps as it happens: a Bus that delivers each Event to its subscribers
// (the admin API's stream, the fleet's verdict drops, the app observer,
// the webhooks)
// without ever blocking a publisher, keeps the most recent ones, and
// signals, per home or app, the next change to whoever waits for it (the
// waiting page's status stream). The engine, the app observer and the
// control plane publish; the event types are named here (types.go), so
// that a reader names no publisher's package.
//
// It holds no DESIGN rule of its own; it serves rule 7's waiting page,
// which follows a wake through Changed. Nothing is counted from it: a bus
// that may drop events feeds dashboards, never metrics.
package events
