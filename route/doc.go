// Package route is the request path of homes and apps. Path serves
// /node/{target}/..., /apps/{slug}/..., their host-routed names
// (hosts.apps_domain, hosts.nodes_domain), the waiting page and its
// status, and a home's ready signal; a request walks it once:
//
//	host or path route (hosts.go, fastroute.go) -> access gate (access.go)
//	-> session -> warm verdict, or the wake (serve.go) -> the home's
//	connection slot (homeconns.go) -> proxy
//
// It reads the home and app tables (Homes, Apps: the entries it reads,
// Home and App, are its own) and its settings as values; it asks the wake
// engine, the app observer, the session count and the proxy through small
// interfaces of its own (deps.go: Engine, Observer, Sessions, Forwarder),
// which the gateway fills with the concrete values, and calls nothing
// back in the gateway that built it; it imports neither gateway nor
// control.
//
// DESIGN rules that live here:
//
//   - 2: a fresh warm verdict short-circuits everything else (serve.go);
//   - 7: browsers that would wait past wake.hold get the waiting page,
//     which follows the wake through its status stream (waitpage.go,
//     waiting.go); API and WebSocket callers are held;
//   - 14, the request's part: only the self-probe reaches a candidate
//     route (apps.go); the gateway's hygiene marks a self-probe it proved
//     (MarkSelfProbe) and publishes routes;
//   - 23: public error bodies carry a code, a sentence and the request
//     id, the cause goes to the log (serve.go's writeError);
//   - 25: who may reach a home is decided before anything wakes it:
//     denied, rate-limited or no-wake requests never start a home (Gate);
//   - 27: a slow client holds a home's forwarding capacity only while the
//     upstream exchange needs it (HomeConns);
//   - 31, the request's part: the gateway's cookies reach no home,
//     whatever policy decides the route (access.go).
//
// Inflight, the count of requests being served that the drain waits on,
// is here too: a request may join it at any time. So is Recorder, the
// public listener's response writer, which records a request's answer for
// the access log and the metrics and releases the request when it is over
// (recorder.go): when its handler returns, or when its detached WebSocket
// relay ends.
package route
