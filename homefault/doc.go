// Package homefault names what can go wrong with a home: the public codes
// of the lifecycle engine's errors (CodeHomeNotFound, CodeHomeWaking, ...)
// and the constructors that build them as *fault.Error values, each with a
// kind, a code and a sentence for the public, and for operators the cause
// and, where there is a likely fix, a hint (Hint). The engine (package
// wake) returns them; the request path compares codes and answers a
// request that must not wake a home with Asleep. Nothing here chooses an
// HTTP status: fault.Classify does.
//
// DESIGN rule that lives here: the engine's side of 23 (a public message
// never carries an internal detail, a path, a port, a pid or a command
// line: the provider's or the probe's error goes in the cause). It imports
// nothing of the engine.
package homefault
