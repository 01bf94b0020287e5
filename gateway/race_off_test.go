//go:build !race

package gateway_test

// raceOn says the tests run under the race detector.
const raceOn = false
