// Package wakerecord is what the gateway tells about a home's wakes, past
// and current: the last wakes that finished on this engine (Record,
// History), how long a wake usually takes (Expected), where a wake stands
// for a waiting page (View, Observe) and what the admin list filters a
// home on (Brief), and the log of a wake while it runs (Progress). The
// engine (package wake) keeps these values for each of its homes and hands
// out copies; nothing here starts a wake, takes a lock or reads a store,
// so a page may poll it as often as it likes.
//
// DESIGN rules that live here: the engine's side of 7 (the phases a
// waiting page shows while a home wakes, and the failure it turns into);
// the progress reporter's part of 6 (its goroutine ends before stop
// returns, or with the wake's context); the wake itself, and what it records in the store (rules 1-5), stay in
// package wake.
package wakerecord
