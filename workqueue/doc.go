// Package workqueue runs background work keyed by a home's id, a few keys
// at a time, so that one slow key delays only itself: the lifecycle
// engine's idle suspends and the refreshes of the homes a gateway adopts
// at start go through a Queue.
//
// A key added while it waits is not queued twice; a key is never worked on
// by two workers at once, and one added again while its work runs is
// worked on once more after that run ends. Workers start when keys wait
// and end when none is left, at most Queue's bound at once; Close ends the
// work and waits for every worker.
//
// DESIGN rules that live here: 6 (no goroutine outlives the queue: Close
// waits for them all) and the queue's side of 16 (the work of one home is
// serialised; its lifecycle lock, taken by the work itself, serialises it
// across the fleet).
package workqueue
