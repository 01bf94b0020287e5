// Package route holds the parts of the request path that stand on their
// own, outside the gateway that wires them: today the per-home cap on
// forwarded requests (DESIGN rule 27, proxy.max_conns_per_home). It reads
// no gateway state; the gateway gives it what it needs as arguments.
package route
