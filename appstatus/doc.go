// Package appstatus observes apps: it walks each app's status ladder
// (ladder.go) against the lifecycle engine's homes and a gateway
// instance's route table, keeps the last status and phase changes of every
// app (apps.go, history.go), schedules its observations (schedule.go), and
// runs the operator's start, stop and restart of an app in a home
// (ops.go). It asks the engine for what it needs through Homes and the
// route table through Routes, both implemented elsewhere (*wake.Engine,
// control.AppTable); it imports neither control nor the request path.
//
// DESIGN rules that live here: 11 (an app's phase comes from a ladder
// checked in order, runtime, the runtime's own health check (health.go),
// the direct health check, endpoint, route, self-probe; every phase
// carries a reason code and a sentence), 12 (the status rules a
// direct health check and the self-probe are judged by; the rules
// themselves are probe.StatusPasses, shared with the readiness probe) and
// 13 (refreshes of one app coalesce, are cached for a minimum interval and
// bounded as a whole; a timed-out refresh returns the last stored status).
package appstatus
