package proxy

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// clientBody records a failure to read the caller's request body (a
// malformed chunk, a body over the limit, a connection cut mid-body), so
// the failed forward is answered as the caller's fault (400 or 413) and
// the upstream's warm verdict is not dropped for it: no client can make
// a healthy home look broken by sending a bad body.
type clientBody struct {
	io.ReadCloser
	err *atomic.Pointer[h1client.BodyError]
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, h1client.ErrBodyStopped) {
		b.err.CompareAndSwap(nil, &h1client.BodyError{Err: err})
	}
	return n, err
}

// clientBodyFailed returns the error of route's request body, if reading it
// failed (nil for a nil route).
func (route *forwarding) clientBodyFailed() error {
	if route == nil || route.body == nil {
		return nil
	}
	if be := route.body.Failed.Load(); be != nil {
		return be.Err
	}
	return nil
}

// badBody answers a request whose body could not be read: 413 past the
// body limit, else 400.
func badBody(err error) fault.Response {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return StatusOf(err)
	}
	return StatusOf(fault.Wrap(fault.Invalid, "bad_body", "The request body could not be read.", err))
}
