// Package h1client is the data plane's own HTTP/1.1 client toward
// upstreams: the Forwarder, which carries a plain request on the calling
// goroutine over a pooled connection (Pool) and reads the response head
// without net/http, and hands whatever it does not carry (upgrades,
// Expect: 100-continue, https) to a fallback Transport. A Sender writes
// the request: ReverseProxy's outbound *http.Request through RoundTrip,
// or the proxy's direct path, which writes its head as bytes. A plain
// response's fields can go to the client as checked wire bytes
// (HeadBlock), and a large body of known length can be spliced from the
// upstream's connection (Splice).
//
// DESIGN rule 26 lives here for every forward path: a request body has
// one reader at a time and none after its request (OwnedBody; body.go
// writes the rule down). The proxy above decides what is sent (its
// outbound header plan) and whether a failed forward is retried; the
// forwarder only sends a request again on a fresh connection when the
// pooled one it took was found closed and nothing of the request reached
// the upstream (net/http's rule).
package h1client
