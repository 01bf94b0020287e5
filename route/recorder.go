package route

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/h1head"
	"github.com/wakegate/wakegate/proxy"
)

// What a warm request needs beyond net/http and the proxy is made without
// allocations of its own where it can be: its route and its request id's
// header value live in the Recorder (one allocation per request for all
// three), and the functions a forward to a home hands the proxy are made
// once per home (Path.hooks).

// Recorder is the public listener's response writer for one request: it
// captures the status and size of the response for the access log and the
// metrics, holds the request's route and request id, and releases the
// request when it is over (Exchange, proxy.Detacher). Unwrap lets
// http.ResponseController reach Flush and Hijack.
type Recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// fwd is when the request was forwarded (after any wake wait), and
	// headerAt when its response headers were written.
	fwd, headerAt time.Time
	// end is what the request releases when it is over.
	end reqEnd
	// route is the request's route (newRoute), and reqID the value of its
	// X-Request-Id header when the listener set it (SetRequestID): one
	// allocation for the three.
	route forward.Route
	reqID [1]string
	// limit names the limit that refused the request (MarkLimit), for
	// the access log; "" when none did.
	limit string
}

// Releases are what every request of a listener gives back when it is
// over, and the context that cuts a request whose end was detached.
type Releases struct {
	// Inflight counts the request until it is over; the listener adds
	// it before NewRecorder.
	Inflight *Inflight
	// Clients gives back a forwarded client's place under the connection
	// cap (SetClient).
	Clients ClientSlots
	// HardStop ends a detached request (a WebSocket relay) when the drain
	// grace is over.
	HardStop context.Context
}

// ClientSlots is the per-client connection cap as a request releases its
// place in it (edge.ConnLimit).
type ClientSlots interface {
	// Release gives back one place of ip; an invalid ip is none.
	Release(ip netip.Addr)
}

// NewRecorder returns the recorder of a request answered through w; rel
// is what it releases when it is over (nil: nothing).
func NewRecorder(w http.ResponseWriter, rel *Releases) *Recorder {
	return &Recorder{ResponseWriter: w, end: reqEnd{rel: rel}}
}

// reqEnd is what a request releases when it is over: the functions added
// to it, last added first, then its forwarded client's place under the
// connection cap, and its place in the in-flight count last.
type reqEnd struct {
	rel *Releases // nil once released
	fns []func()
	// client is whom a trusted proxy forwarded the request for, counted
	// by the connection cap until the request is over (invalid when not
	// counted).
	client netip.Addr
}

// add has f run when the request is over.
func (e *reqEnd) add(f func()) { e.fns = append(e.fns, f) }

// run releases the request; it does nothing when run again.
func (e *reqEnd) run() {
	for i := len(e.fns) - 1; i >= 0; i-- {
		e.fns[i]()
	}
	e.fns = nil
	if e.rel != nil {
		e.rel.Clients.Release(e.client)
		e.rel.Inflight.Done()
		e.rel = nil
	}
}

// End releases the request, unless its end was detached (Detach): the
// listener defers it.
func (r *Recorder) End() { r.end.run() }

// SetClient has the request hold ip's place under the connection cap
// until it is over (a client a trusted proxy forwarded for).
func (r *Recorder) SetClient(ip netip.Addr) { r.end.client = ip }

// SetRequestID gives req a new request id, pre followed by n in base 36,
// in the X-Request-Id header value that r holds.
func (r *Recorder) SetRequestID(req *http.Request, pre string, n uint64) {
	var b [48]byte
	id := strconv.AppendUint(append(b[:0], pre...), n, 36)
	r.reqID[0] = string(id)
	req.Header["X-Request-Id"] = r.reqID[:1:1]
}

// MarkLimit records that the limit of scope refused the request
// (proxy.LimitMarker).
func (r *Recorder) MarkLimit(scope string) { r.limit = scope }

// Limit is the limit that refused the request, "" for none.
func (r *Recorder) Limit() string { return r.limit }

// Bytes is how many bytes of the response body were written.
func (r *Recorder) Bytes() int64 { return r.bytes }

// Detach hands the end of the request to the WebSocket relay the proxy
// is about to start (proxy.Detacher): the handler returns at once, and
// the request (its session, its place in the drain's count) ends when the
// relay does, or when the hard stop cuts it.
func (r *Recorder) Detach() (context.Context, func()) {
	e := new(reqEnd)
	*e, r.end = r.end, reqEnd{}
	if e.rel == nil {
		return context.Background(), e.run // released already
	}
	return e.rel.HardStop, e.run
}

// Route is the request's one route (Exchange).
func (r *Recorder) Route() *forward.Route { return &r.route }

// AtEnd has f run when the request is over (Exchange).
func (r *Recorder) AtEnd(f func()) { r.end.add(f) }

// Forwarding notes that the request is being forwarded now (Exchange).
func (r *Recorder) Forwarding() { r.fwd = time.Now() }

// Answer is the request's status and when it was forwarded and answered
// (Exchange).
func (r *Recorder) Answer() (status int, fwd, headerAt time.Time) { return r.status, r.fwd, r.headerAt }

// WriteHeader records the first final (or 101) status and when it was
// written.
func (r *Recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
		r.headerAt = time.Now()
	}
	r.ResponseWriter.WriteHeader(code)
}

// WriteHeaderBlock records the status as WriteHeader does when the
// wrapped writer takes the head's fields as wire bytes (h1serve's).
func (r *Recorder) WriteHeaderBlock(code int, b *h1head.Block) bool {
	bw, ok := r.ResponseWriter.(proxy.BlockWriter)
	if !ok || !bw.WriteHeaderBlock(code, b) {
		return false
	}
	if r.status == 0 {
		r.status = code
		r.headerAt = time.Now()
	}
	return true
}

// Write counts the bytes of the body; a first write answers 200.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.headerAt = time.Now()
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap returns the wrapped writer (http.ResponseController).
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

var (
	_ Exchange          = (*Recorder)(nil)
	_ proxy.Detacher    = (*Recorder)(nil)
	_ proxy.BlockWriter = (*Recorder)(nil)
)
