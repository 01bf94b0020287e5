// Package control is the gateway's control plane: the registrar, the one
// path by which homes and apps join and leave (from the config at start
// and on reload, from the admin API, from the store at start and from a
// fleet's sync), and the conversions between the home's declaration, its
// stored record and the engine's spec (decl.go).
//
// It changes the gateway's route tables and asks the engine and the store
// through small interfaces of its own (deps.go), which the gateway
// implements; it imports no package that serves a request.
//
// DESIGN: rule 15 (every stored record a registration writes is a
// compare-and-set on generation and owner; a stale writer gets a
// conflict), rule 14 (an app joins as a candidate: only its self-probe
// publishes it) and rule 28's healing side (a config home takes its
// target back from whoever holds it). The config wins over the store and
// the admin API on every conflict, and a target routes one home: whoever
// holds its claim in the store's target index.
package control
