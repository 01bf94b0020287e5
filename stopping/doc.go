// Package stopping is the fleet's stopping handshake (DESIGN rule 33): a
// suspend is a fleet-wide decision, never a guess from session reports
// that may be a second old.
//
//  1. The stopping gateway holds the home's lifecycle lock and has dropped
//     its own warm verdict, so its own new requests wait for the lock.
//  2. It marks the record stopping (Mark: status suspending, not wanted),
//     a write fenced by the lock's lease.
//  3. It asks every live gateway of the fleet (StopBarrier) to quiesce the
//     home: each drops its warm verdict of the home, so that its new
//     requests take the slow path and wait for the lock (and so for the
//     next wake), and only then answers with its live sessions on the home
//     (Quiet: in-flight requests, WebSockets, leases). A request counts its
//     session before it looks at the verdict (route/serve.go), so every
//     request is either counted in the answer or waits.
//  4. Any live session, or a gateway whose heartbeat is live but that did
//     not answer, backs the stop off (Quiesce): the record returns to what
//     it was and the home stays up. A gateway whose heartbeat lapsed cannot
//     be forwarding: the engine stops trusting its warm verdicts the moment
//     its own heartbeat could have lapsed, and the ones it answers from
//     after that are proven again first.
//
// The same handshake comes before every other stop of a running home's
// process: a roll's recreate (the mark is restoring, and callers waiting
// for this very wake are not users, rule 8) and a gateway's shutdown in a
// fleet (the mark keeps the desired state; a home still in use elsewhere
// is handed over to the fleet running instead of stopped, Shutdown).
//
// The lifecycle engine (package wake) holds the lock, lends the held home
// through Held, answers other gateways' questions and stops the process;
// the fleet's peers (package control) carry the question. The warm path
// touches none of this, and without a fleet (one gateway on the embedded
// store) the same steps run with no one to ask.
//
// DESIGN rules that live here: 33 (the mark, the question to the fleet and
// the decision whether the stop may go on), and the handshake's side of 8
// (callers waiting for a roll's own wake are not users) and of 20 (a
// shutdown hands a home in use elsewhere over to the fleet).
package stopping
