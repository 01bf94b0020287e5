// Package faultinject holds fault-injection tests: each starts the real
// wakegate binary with real homes on loopback, breaks something (a killed
// gateway, a damaged store, a crash-looping home, a slow client) and checks
// that nothing is lost and that the gateway heals. The package has no code
// of its own; its tests live in *_test.go files, one per concern, over the
// shared helpers of helpers_test.go.
package faultinject
