package h1client

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Who reads a request body, and until when (DESIGN rule 26). One rule on
// every path:
//
//   - Serve wraps the server's body, first of all, in an OwnedBody, kept on
//     the Route. Everything the proxy reads of the body goes through it.
//   - An exchange of the upstream forwarder (forwarder.go, both the direct
//     path and ReverseProxy's round trips) reads the body on a goroutine of
//     its own, its body writer, from when the request head is sent until
//     the exchange ends: the response read to its end or closed, or the
//     exchange failed. The exchange does not end while its writer runs: a
//     writer still running then is stopped (its upstream write cut, the
//     OwnedBody ended) and waited for. So the handler never returns while a
//     goroutine of its exchange touches the request.
//   - The server may drain what is left of the body when the response head
//     goes out (net/http and h1serve both do): its reads and the writer's
//     take turns on the server's own lock, each byte going to one of them.
//   - Serve ends the OwnedBody before it returns, whatever path the request
//     took (a round trip of net/http's Transport may read on after it
//     returned). A read after the end gets ErrBodyStopped; a read in
//     progress is cut through the client connection's read deadline and
//     waited for. A cut leaves the client connection's read deadline in the
//     past: what is left of the body is unknown and the server closes the
//     connection after the response.
//
// The server's body adds its own guard (h1serve's body refuses reads once
// the handler returned; net/http's after Close), so that no read, however
// late, gets bytes of another request.

// ErrBodyStopped is what a read of a request body gets once its exchange
// or its request is over.
var ErrBodyStopped = errors.New("request body read after its exchange ended")

// OwnedBody is a request body that its owner can end: later reads get
// ErrBodyStopped, and a read in progress is cut and waited for.
type OwnedBody struct {
	rc   io.ReadCloser
	w    http.ResponseWriter // to cut a read blocked on the client
	mu   sync.Mutex          // held by a read in progress
	over atomic.Bool         // end has begun
	cut  atomic.Bool         // end cut a read in progress
	// cutAt is when end cut a read in progress (UnixNano), so that a
	// read that failed on a deadline can tell whose deadline came first
	// (cutAfter).
	cutAt atomic.Int64
	// Failed is the first read error of the body, as the client's
	// failure (the proxy's clientbody.go).
	Failed atomic.Pointer[BodyError]
}

func NewOwnedBody(rc io.ReadCloser, w http.ResponseWriter) *OwnedBody {
	return &OwnedBody{rc: rc, w: w}
}

func (b *OwnedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over.Load() {
		return 0, ErrBodyStopped
	}
	n, err := b.rc.Read(p)
	if err != nil && b.over.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		err = ErrBodyStopped // our own cut, not the client's failure
	}
	return n, err
}

// Close closes the server's body; it does not wait for a read (end does).
func (b *OwnedBody) Close() error { return b.rc.Close() }

// End stops the body: no read starts after it, and one in progress is cut
// and waited for. It may be called more than once.
func (b *OwnedBody) End() {
	if b == nil {
		return
	}
	b.over.Store(true) // a read waiting for mu gives up
	if b.mu.TryLock() {
		b.mu.Unlock()
		return
	}
	// A read is in progress, blocked on the client or about to return.
	// Any deadline it set (minrate.Body) was set before it took mu, so before
	// this one.
	b.cutAt.Store(time.Now().UnixNano())
	b.cut.Store(true)
	_ = http.NewResponseController(b.w).SetReadDeadline(aLongTimeAgo)
	b.mu.Lock()
	b.mu.Unlock() //nolint:staticcheck // the lock is taken to wait for the read
}

// CutAfter reports whether end cut a read in progress no sooner than t:
// a read whose own deadline t had passed by then failed on that deadline,
// not on the cut, although it returns ErrBodyStopped.
func (b *OwnedBody) CutAfter(t time.Time) bool {
	return b != nil && b.cut.Load() && b.cutAt.Load() >= t.UnixNano()
}

// WasCut reports whether end cut a read in progress (the client
// connection's read deadline is then in the past on purpose).
func (b *OwnedBody) WasCut() bool { return b != nil && b.cut.Load() }

// BodyError is the first read error of a request body (OwnedBody.Failed).
type BodyError struct{ Err error }
