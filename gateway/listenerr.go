package gateway

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/wakegate/wakegate/edge"
)

// ListenError is a listener that could not be opened, with the way out
// for the operator (Hint).
type ListenError struct {
	Addr  string // the address asked for
	Field string // the config field that named it, e.g. "listen", "tls.http_listen"
	Err   error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("listen %s (%s): %v", e.Addr, e.Field, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// Hint is the likely fix, "" when there is none to give.
func (e *ListenError) Hint() string {
	switch {
	case errors.Is(e.Err, syscall.EACCES):
		return "ports below 1024 need root or the capability CAP_NET_BIND_SERVICE: set " + e.Field +
			" to a port above 1023 (for example \":8080\") and forward the low port to it, " +
			"or grant the binary the capability (sudo setcap cap_net_bind_service=+ep ./wakegate)"
	case errors.Is(e.Err, syscall.EADDRINUSE):
		return "another process listens on " + e.Addr + ": stop it, or set " + e.Field + " to a free port"
	}
	return ""
}

// listen opens a TCP listener on addr, named by the config field field.
func listen(addr, field string) (net.Listener, error) {
	ln, err := edge.Listen(addr)
	if err != nil {
		return nil, &ListenError{Addr: addr, Field: field, Err: err}
	}
	return ln, nil
}
