// Package probe proves a home ready through the path its callers will
// use: Run repeats bounded attempts of one kind (a WebSocket upgrade at
// /node/{target}, an HTTP GET, a TCP connect, or auto: the GETs of the
// apps inside the home, then the upgrade, then a GET) until one passes or
// its context ends, watching the port between attempts and running the
// next attempt at once when the home says it is ready. Beside it, the
// status rules an answer is judged by (StatusPasses), which the app
// status ladder and the self-probe apply too, and the operator's hints
// for a probe that did not pass (hint.go).
//
// DESIGN rules that live here: 3 (ready means the real serving path
// answers; a failed attempt does not abort, at least one attempt is
// always made, the port is watched between attempts, and a home's ready
// signal runs the next attempt at once but never passes by itself), 36
// (each WebSocket attempt is bounded; an upgrade refused or left
// unanswered falls back to a GET, a 101 followed by an error close is not
// ready, and no GET vouches for a broker that answered an upgrade), the
// status rules of 12 (2xx and 3xx pass; API rules also pass 401 and 403;
// 400, 404 and 5xx never pass), and the probe's part of 6 (no goroutine or
// timer started by Run outlives it; its connections are closed before it
// returns). It imports nothing of the engine: wake, the app status ladder
// and the self-probe call it.
package probe
