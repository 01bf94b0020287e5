// Package proxy is wakegate's data plane: it forwards HTTP and WebSocket
// requests to a resolved upstream with header hygiene and maps every error
// to one status. It knows nothing of how a route was resolved; the request
// path hands it a forward.Route. Who uses a home is counted around each
// forward by the request path, in package sessions.
//
// Two paths forward a request: the direct path (direct.go), which writes
// a plain request's head as bytes, and ReverseProxy with Rewrite
// (forward.go) for everything else. They share one outbound header plan,
// computed once per request (headers.go: DESIGN rules 22 and 35, identity
// headers kept only from trusted proxies, and what a home or app
// receives), and one retry decision (retry.go: a forward whose upstream
// could not be reached is retried once, on a fresh wake, and only when it
// can be replayed, as DESIGN's "One request, warm and cold" walks it).
//
// Plain HTTP/1.1 requests are carried by the proxy's own client
// (h1client: the forwarder and its connection pool). A request body has
// one reader at a time, and none after its request (DESIGN rule 26):
// Serve owns it for the request (h1client.OwnedBody), an exchange's body
// writer reads it only while the exchange lasts and is stopped and waited
// for before the exchange ends, and a read after the end gets an error.
// h1client/body.go writes the rule down for every path (direct,
// forwarder, ReverseProxy, net/http's Transport).
//
// Other DESIGN rules that live here: 23 on the public side (a code, a
// sentence and a request id), 27 (a slow client holds a home's capacity
// only while the exchange needs it: the read-ahead in spool.go; the
// minimum rates in minrate) and the
// data plane's part of 31 (the relay token masked in answers).
package proxy
