// Package ownership holds the fleet's rules for machine-local homes (a
// provider.Quiescer: exec), whose process lives on one machine: which
// gateway runs a home (the record's runner), whether that runner is alive,
// this gateway's lease on the homes it runs and the restart it claims in
// the store, which homes a shutdown may stop, and the heal of a store that
// lost its data. The lifecycle engine (package wake) asks these questions
// of an Owner and acts on the answers: the wake that forwards to a home's
// runner, and the stop asked of the runner, are steps of the engine's own
// operations.
//
// DESIGN rules that live here: 28 (one runner per machine-local home in a
// fleet, owner.go; the heal of a store that lost its data, reseed.go) and
// 32 (a gateway acts on a home's process only while it holds its lease,
// fenced by the store, lease.go).
package ownership
