// Package rolls holds what the lifecycle engine decides a roll by (DESIGN
// rules 8 to 10), apart from the roll's steps, which run inside a wake in
// package wake: the roll options and counters, the release each target
// version runs from and the brake on a bad target (Releases), this
// instance's session report to the fleet, which a roll subtracts from the
// fleet's count of a home's sessions to learn how many other gateways
// hold (Reports), and the runtime health check a recreated home must pass
// (Healthy).
//
// DESIGN rules that live here: the brake of 10 (a target recorded bad, in
// the store or, when the store could not take it, on this instance, stops
// every roll onto it until a newer target is registered; Releases.Bad),
// the fleet's side of 8 (a running home is busy while another instance
// reports a session for it; Reports.Others errs towards busy), and the
// health rung of 11 inside a roll (a release whose runtime health check
// fails is a failed roll and is rolled back; Healthy).
package rolls
