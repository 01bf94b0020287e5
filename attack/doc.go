// Package attack holds the gateway's attack suite: tests only (attack_test.go)
// that start a real gateway on loopback in front of real upstreams and send
// raw requests over net.Dial, so that no client library cleans the input.
// Each case is a table row; `go test -v ./attack/` lists every case and its
// result.
package attack
