// Package edge holds what guards a connection of the public listener and
// the shape of a request before it reaches routing.
//
// On the connection: the framing watcher that refuses ambiguous framing
// above TLS (DESIGN rule 24), the per-client connection cap, and the
// HTTPS listener that does handshakes off the accept loop and bounds
// HTTP/2 rapid resets. Its connection wrappers keep ReadFrom, so that
// large bodies still move in the kernel. Beside them, the admin socket's
// listener (adminsocket.go), which accepts only the peers the kernel names
// as allowed: it guards the operator's connections the same way, at
// accept.
//
// On the request, before routing (hygiene.go; the gateway wires it):
// canonical paths (rule 21, canon.go), a path that is not canonical is
// redirected to its canonical form or refused, never rerouted; the
// framing watch's refusal (24); and the one trusted-peer rule (22,
// trusted.go): only a trusted proxy's forwarding headers and request id
// are kept, and the proxy's outbound plan and the client-address
// resolver are handed the same check.
package edge
