// Package route holds the parts of the request path that stand on their
// own, outside the gateway that wires them:
//
//   - HomeConns, the per-home cap on forwarded requests
//     (proxy.max_conns_per_home): a slow client holds a home's forwarding
//     capacity only while the upstream exchange needs it (DESIGN rule 27);
//   - the waiting page's status stream and public report (DESIGN rule 7):
//     StreamWake follows a home's or an app's wake through a WaitSource
//     until the page may load its URL again;
//   - Inflight, the count of requests being served that the drain waits
//     on, which a request may join at any time.
//
// It reads no gateway state and imports neither gateway nor control; the
// gateway gives it what it needs as arguments and small interfaces.
package route
