//go:build !linux

package proxy

import "errors"

// canPark: no shared epoll set here; pumps wait on the netpoller with a
// goroutine each.
const canPark = false

// errParked is never returned here.
var errParked = errors.New("pump parked until its source is readable")

// parkResult is what park did.
type parkResult int

const (
	parked parkResult = iota
	readable
	refused
)

// parker does nothing here: park never parks.
type parker struct{}

// parksSoFar is always 0 here.
func (*parker) parksSoFar() uint64 { return 0 }

func (*parker) park(*relay, *pump) (parkResult, error) { return refused, nil }
func (*parker) release(*relay)                         {}
func (*parker) stop()                                  {}
