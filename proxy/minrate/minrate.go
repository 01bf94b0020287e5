// Package minrate keeps the minimum data rates of the proxy's clients
// (DESIGN rule 27: minimum rates are enforced in seconds whatever the body
// size), in the manner of Kestrel's MinRequestBodyDataRate and
// MinResponseDataRate: a client that sends a request body (Body), or
// reads a response (Writer, or the server's own writer through
// WriteFloorer), slower than a floor after a grace period is cut, so that
// a trickle of bytes can neither hold a connection and a goroutine for
// ever nor keep a home counted as in use. Both work through the
// connection's deadlines (http.ResponseController), so a stalled client
// is cut by the runtime's poller with no timer of ours.
package minrate

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/internal/h1head"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// ErrBodyTooSlow is what a request body's Read returns once the body
// arrived slower than the floor.
var ErrBodyTooSlow = errors.New("the request body arrived slower than the minimum rate")

// Body enforces the minimum request body rate over a sliding window.
// Only the time spent waiting inside Read counts (not the time the
// upstream takes to accept what was read). The body holds a credit of
// waiting time: grace to begin with, plus 1/rate seconds for each byte
// received, never more than grace plus window; each wait spends it, and
// a read that outwaits it is cut. A body that keeps the rate never runs
// out, while one that stops is cut within grace plus window of its last
// byte, however much it sent before (a credit earned over the whole body
// let a client that sent 32MiB at speed and then stalled hold its
// connection and its spool for days).
type Body struct {
	body   io.ReadCloser
	rc     *http.ResponseController
	rate   float64 // bytes per second
	credit time.Duration
	most   time.Duration       // the credit's cap: grace plus window
	cut    *atomic.Bool        // set once the body was cut
	owner  *h1client.OwnedBody // the body as Serve owns it (h1client/body.go)
	// done: the deadline is lifted (or was never settable); Close may set
	// it from another goroutine than Read's.
	done atomic.Bool
}

func NewBody(body io.ReadCloser, w http.ResponseWriter, rate int64, grace, window time.Duration, cut *atomic.Bool, owner *h1client.OwnedBody) *Body {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Body{body: body, rc: http.NewResponseController(w), rate: float64(rate), credit: grace,
		most: grace + window, cut: cut, owner: owner}
}

func (b *Body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return b.body.Read(p)
	}
	start := time.Now()
	deadline := start.Add(max(b.credit, 0))
	if err := b.rc.SetReadDeadline(deadline); err != nil {
		b.done.Store(true) // this connection cannot be timed: no floor
		return b.body.Read(p)
	}
	n, err := b.body.Read(p)
	earned := time.Duration(float64(n) / b.rate * float64(time.Second))
	b.credit = min(b.credit-time.Since(start)+earned, b.most)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded),
		// The exchange ended the body (OwnedBody.End) while this read
		// was failing on its own deadline: the client was too slow all
		// the same.
		errors.Is(err, h1client.ErrBodyStopped) && b.owner.CutAfter(deadline):
		b.cut.Store(true)
		return n, ErrBodyTooSlow
	case err != nil:
		b.finish()
	}
	return n, err
}

// finish lifts the deadline once the body is read (or given up on): the
// server's own read of the connection, which begins at the end of the
// body, must not inherit it.
func (b *Body) finish() {
	if b.owner.WasCut() {
		return // the connection closes after this response (h1client/body.go)
	}
	if b.done.CompareAndSwap(false, true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

func (b *Body) Close() error {
	if !b.cut.Load() {
		b.finish()
	}
	return b.body.Close()
}

// WriteFloorer is a response writer that keeps a minimum rate itself, in
// time across the whole response (h1serve's, on a plain TCP connection:
// a timed-out write there can go on, so the client is measured by what it
// took, not by how long one write blocked). See SetWriteFloor.
type WriteFloorer interface {
	SetWriteFloor(rate int64, grace time.Duration) bool
}

// SetWriteFloor asks w, or a writer it wraps, to keep the minimum response
// rate; false when none can (net/http's writer, a TLS connection), and
// the Writer's pieces apply instead.
func SetWriteFloor(w http.ResponseWriter, rate int64, grace time.Duration) bool {
	for range 16 {
		switch x := w.(type) {
		case WriteFloorer:
			return x.SetWriteFloor(rate, grace)
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Writer enforces the minimum response rate where the server's writer
// cannot (SetWriteFloor): behind net/http's writer, or on TLS, a write
// that times out spoils the connection for good, so each deadline must be
// final and allow a whole piece at the rate. A response goes to the
// connection in pieces of at most piece bytes (about a second of data at
// the rate, see ratePiece), each of which the client must take within
// grace plus the piece's size (and what the server holds buffered) at the
// rate, or the connection is closed. A reader that falls below the rate is
// so cut within about grace plus one piece's time, whatever the body's
// size and whichever way it is written (Write, or ReadFrom's splice).
// The server's buffered tail is flushed after the handler returns, under
// the deadline the last piece set; the next request on the connection
// lifts it (LiftWriteDeadline).
type Writer struct {
	http.ResponseWriter
	rc    *http.ResponseController
	rate  float64
	grace time.Duration
	piece int64
	// deadline is the write deadline set last: one that is still a
	// little short of what a piece allows is kept, so that a fast client
	// costs one deadline every grace/2, not one per piece.
	deadline time.Time
	off      bool // the connection cannot be timed
}

func NewWriter(w http.ResponseWriter, rate int64, grace time.Duration) *Writer {
	return &Writer{ResponseWriter: w, rc: http.NewResponseController(w), rate: float64(rate), grace: grace,
		piece: ratePiece(rate, minWritePiece)}
}

// ratePiece is the most bytes written under one deadline at rate: about a
// second's worth, so that a stall is seen within a second or so of the
// grace, but at least least (smaller pieces cost more system calls than
// they gain) and at most maxRatePiece.
func ratePiece(rate, least int64) int64 { return min(max(rate, least), maxRatePiece) }

const (
	// minWritePiece is the least piece of a copy's writes, the size of
	// its buffer: each piece is a write system call of its own (the
	// server's buffer is 4KiB), and splitting a 256KiB copy in 16KiB
	// pieces cost 8% more CPU.
	minWritePiece = 32 << 10
	// minSplicePiece is the least piece of a splice (ReadFrom): each
	// costs a few system calls.
	minSplicePiece = 64 << 10
	maxRatePiece   = 1 << 20
)

// arm makes the write deadline allow n more bytes, written from now:
// grace plus n and the server's buffer at the rate. A deadline set before
// is kept while it falls within the last half of the grace of that.
func (w *Writer) arm(n int64) {
	if w.off {
		return
	}
	want := time.Now().Add(w.grace + time.Duration(float64(n+responseBuffer)/w.rate*float64(time.Second)))
	if !w.deadline.After(want) && w.deadline.After(want.Add(-w.grace/2)) {
		return
	}
	if err := w.rc.SetWriteDeadline(want); err != nil {
		w.off = true
		return
	}
	w.deadline = want
}

// responseBuffer is about what the server holds back before it writes to
// the connection, and so may write with any one write or flush.
const responseBuffer = 4 << 10

func (w *Writer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := int(min(int64(len(p)), w.piece))
		w.arm(int64(k))
		n, err := w.ResponseWriter.Write(p[:k])
		written += n
		if err != nil {
			return written, err
		}
		p = p[k:]
	}
	return written, nil
}

func (w *Writer) WriteHeader(code int) {
	w.arm(0)
	w.ResponseWriter.WriteHeader(code)
}

// WriteHeaderBlock passes a relayed head whose fields are wire bytes on
// to the wrapped writer, under the deadline WriteHeader would set, when
// that writer takes such heads (the HTTP/1.1 loop's, over TLS, where the
// floor cannot be kept by the loop itself). It reports false, having done
// nothing, when the wrapped writer does not take them or refuses this one.
func (w *Writer) WriteHeaderBlock(code int, b *h1head.Block) bool {
	bw, ok := w.ResponseWriter.(interface {
		WriteHeaderBlock(code int, b *h1head.Block) bool
	})
	if !ok {
		return false
	}
	w.arm(0)
	return bw.WriteHeaderBlock(code, b)
}

// ReadFrom passes a body of known length (an *io.LimitedReader, as the
// direct path sends it) to the wrapped writer's ReadFrom (a splice from
// the upstream's connection) one piece at a time, each under its own
// deadline, so the floor holds through a long body as it does for a
// copy's writes. Any other source is copied through Write.
func (w *Writer) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	lr, known := src.(*io.LimitedReader)
	if !ok || !known {
		return io.Copy(writeOnly{w}, src)
	}
	var total int64
	piece := ratePiece(int64(w.rate), minSplicePiece)
	for lr.N > 0 {
		seg := &io.LimitedReader{R: lr.R, N: min(lr.N, piece)}
		want := seg.N
		w.arm(want)
		n, err := rf.ReadFrom(seg)
		total += n
		lr.N -= n
		if err != nil || n < want {
			return total, err
		}
	}
	return total, nil
}

// writeOnly hides a writer's ReadFrom from io.Copy.
type writeOnly struct{ io.Writer }

// FlushError flushes under the deadline of the buffered bytes.
func (w *Writer) FlushError() error {
	w.arm(0)
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LiftWriteDeadline clears a write deadline a previous response on the
// same connection left for its buffered tail (see Writer). The gateway
// calls it at the start of every request when a minimum response rate is
// set.
func LiftWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// DefaultWindow is Options.MinRateWindow when unset.
const DefaultWindow = 5 * time.Second
