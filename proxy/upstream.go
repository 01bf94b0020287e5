package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/internal/ctxhook"
)

// forwarder forwards a plain HTTP/1.1 request on the calling goroutine: it
// takes an idle pooled connection to the upstream (or dials one), writes
// the request through a pooled bufio.Writer, reads the response with the
// connection's own reader, and hands the connection back to the pool when
// the response body has been read to its end. net/http's Transport spends
// two goroutines per connection and a channel hand-off each way on every
// request; here a request without a body costs none.
//
// A request body is written by a goroutine of the round trip while the
// response is read, as the Transport does, so an upstream that answers
// before it has read the whole body (or echoes it as it reads) does not
// deadlock against us. What it does not handle goes to fallback (the
// Transport): upgrades, Expect: 100-continue, and any scheme but http.
//
// An idle connection is checked before reuse (nothing buffered, and a
// non-blocking peek finds it open); one the upstream closed anyway is
// found by the response read, and the request is sent again once on a
// fresh connection when nothing of it was written, or when it is
// idempotent and has no body (net/http's rule).
type forwarder struct {
	pool *connPool
	// headerTimeout bounds waiting for the response headers; zero: none.
	headerTimeout time.Duration
	fallback      http.RoundTripper
}

// max1xx is how many informational responses one request may get before
// its final one, as in net/http.
const max1xx = 5

// aLongTimeAgo is a deadline in the past, which interrupts a blocked read
// or write at once.
var aLongTimeAgo = time.Unix(1, 0)

var (
	errTooMany1xx    = errors.New("too many 1xx informational responses from the upstream")
	errUnexpected101 = errors.New("upstream switched protocols on a request that asked for no upgrade")
)

// RoundTrip forwards req and returns the upstream's response.
func (u *forwarder) RoundTrip(req *http.Request) (*http.Response, error) {
	if !plainHTTP1(req) {
		return fallback(u.fallback, req)
	}
	res, err := u.send(req.Context(), hostPort(req.URL), req, reqSender{req})
	if ns, ok := err.(errNotSent); ok {
		closeRequestBody(req)
		err = ns.error
	}
	return res, err
}

// fallback sends req through rt (net/http's Transport), and marks a
// failure after the first byte of an answer (a 1xx included) as a partial
// answer, which is never sent again, as the forwarder's own exchanges do.
func fallback(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	var answered atomic.Bool
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { answered.Store(true) }}
	res, err := rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil && answered.Load() {
		err = &partialAnswer{err}
	}
	return res, err
}

// sender writes one outbound request: the forwarder's RoundTrip sends an
// *http.Request (reqSender), the direct path writes the head straight from
// the inbound request (direct.go).
type sender interface {
	// start writes, on the round trip's goroutine, what may be written
	// before the body: the direct path's head, nothing for reqSender.
	start(bw *bufio.Writer) error
	// write writes the rest of the request to bw and flushes it. body is
	// the request body to send (through the exchange's recorder), nil for
	// none; with a body, write runs on a goroutine of its own.
	write(bw *bufio.Writer, body io.ReadCloser) error
	// got1xx passes an informational response on.
	got1xx(code int, h http.Header) error
	// closes reports whether the request asks the upstream to close the
	// connection after the response.
	closes() bool
	// owner is the request body as Serve owns it (body.go), nil for a
	// request that did not come through Serve.
	owner() *ownedBody
	// block is where a plain response's fields go as wire bytes
	// (headBlock); nil: into a header map.
	block() *headBlock
}

// errNotSent marks a failure to get a connection (nothing of the request
// was sent); the callers of send unwrap it.
type errNotSent struct{ error }

func (e errNotSent) Unwrap() error { return e.error }

// send carries req, written by s, to addr: on an idle pooled connection
// or a new one, and once more on a fresh connection when a reused one
// turns out stale (staleRetry). req gives the method, body and header
// that the response framing and the retry rule read.
func (u *forwarder) send(ctx context.Context, addr string, req *http.Request, s sender) (*http.Response, error) {
	c, err := u.pool.get(ctx, addr)
	for retried := false; ; retried = true {
		if err != nil {
			return nil, errNotSent{err}
		}
		var res *http.Response
		res, err = u.exchange(ctx, c, req, s)
		if err == nil {
			return res, nil
		}
		if retried || !staleRetry(req, c, err) || ctx.Err() != nil {
			return nil, err
		}
		c, err = u.pool.dialNew(ctx, addr)
	}
}

// plainHTTP1 reports whether req is one the upstream forwarder handles.
func plainHTTP1(req *http.Request) bool {
	return req.URL.Scheme == "http" && req.Header.Get("Upgrade") == "" && req.Header.Get("Expect") == ""
}

// hostPort is the address to dial for u.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

func closeRequestBody(req *http.Request) {
	if hasBody(req) {
		_ = req.Body.Close()
	}
}

// staleRetry reports whether req, which failed with err on c, may be sent
// again on a fresh connection: c was reused, the upstream sent nothing
// back (not one byte: a 1xx is an answer, passed on already) and did not
// merely time out, and either nothing of req was written or req is
// idempotent with no body.
func staleRetry(req *http.Request, c *upConn, err error) bool {
	if !c.reused || c.answered || isTimeout(err) || hasBody(req) {
		return false
	}
	return c.written == 0 || idempotent(req)
}

func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// exchange sends req on c and reads the response headers. On success the
// response's body owns c; on failure c is closed.
func (u *forwarder) exchange(ctx context.Context, c *upConn, req *http.Request, s sender) (*http.Response, error) {
	c.written = 0
	c.headerLeft = maxResponseHeaderBytes
	c.answered = false
	stop := ctxhook.AfterFunc(ctx, c.interrupt)
	var wr *bodyWriter
	bw := u.pool.writer(c)
	if err := s.start(bw); err != nil {
		u.pool.putWriter(bw)
		return nil, u.fail(ctx, c, stop, nil, err)
	}
	if hasBody(req) {
		wr = u.startWriter(c, bw, req, s)
	} else {
		// The write that ends a request without a body waits for the
		// answer (upConn.await): a read right after it would find
		// nothing yet and cost a system call. Only on a reused
		// connection, whose liveness peek has just found nothing
		// waiting: what came before the wait began may not end it.
		c.await, c.awaited = c.reused, false
		if c.await && u.headerTimeout > 0 {
			c.headerDeadline(time.Now(), u.headerTimeout) // bounds the wait
		}
		err := s.write(bw, nil)
		c.await = false
		u.pool.putWriter(bw)
		if err != nil {
			return nil, u.fail(ctx, c, stop, nil, err)
		}
	}
	if u.headerTimeout > 0 && !c.awaited {
		c.headerDeadline(time.Now(), u.headerTimeout)
	}
	res, err := readResponse(c, req, s)
	if err != nil {
		err = u.fail(ctx, c, stop, wr, err)
		if c.answered {
			err = &partialAnswer{err}
		}
		return nil, err
	}
	if u.headerTimeout > 0 && !bodyHeld(c, res) {
		c.clearDeadline()
		if ctx.Err() != nil {
			// The watch may have run before the reset; it must hold.
			_ = c.SetDeadline(aLongTimeAgo)
		}
	}
	b := &upBody{pool: u.pool, c: c, stop: stop, wr: wr, reusable: !res.Close && !s.closes()}
	if res.Body == http.NoBody {
		b.finish(true)
		return res, nil
	}
	b.rc = res.Body
	res.Body = b
	return res, nil
}

// bodyHeld reports whether res's body, if it has one, is all in c's
// buffer already: reading it reads nothing more from the socket, so the
// head's deadline can stay on for the next exchange. An upgrade's is
// never held: the relay gets the connection without a deadline.
func bodyHeld(c *upConn, res *http.Response) bool {
	if res.StatusCode < 200 {
		return false
	}
	return res.Body == http.NoBody || (res.ContentLength >= 0 && int64(c.br.Buffered()) >= res.ContentLength)
}

// partialAnswer is the failure of an exchange whose upstream had already
// sent something back (a 1xx, part of a head): the request reached it and
// was acted on, so it is never sent again (unreached is false for it).
type partialAnswer struct{ error }

func (e *partialAnswer) Unwrap() error { return e.error }

// fail closes c after a failed exchange, ends its body writer (wr, nil for
// none), and returns the error to report: the context's when the caller
// went away, else the request write's when the write failed on its own,
// else err.
func (u *forwarder) fail(ctx context.Context, c *upConn, stop func() bool, wr *bodyWriter, err error) error {
	stop()
	_ = c.Close()
	if wr != nil {
		if werr := wr.end(); werr != nil && !wr.stoppedErr(werr) {
			err = werr
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// bodyWriter is the goroutine of an exchange that writes the request body
// while the response is read, as the Transport does, so that an upstream
// that answers before it has read the whole body (or echoes it as it
// reads) does not deadlock against us. The exchange owns it: it ends with
// the exchange (end), never later (body.go).
type bodyWriter struct {
	c       *upConn
	rec     *readRecorder
	owner   *ownedBody // nil for a request that did not come through Serve
	done    chan error
	err     error
	ended   bool
	stopped bool // end had to stop it: c's write deadline is in the past
}

// startWriter starts writing req's body, with s, through bw on c.
func (u *forwarder) startWriter(c *upConn, bw *bufio.Writer, req *http.Request, s sender) *bodyWriter {
	// The body is read through a recorder: when reading the caller's body
	// fails (a malformed chunk, a cut connection), the upstream waits for
	// a body that never comes, so the exchange is cut at once and the read
	// error is what the round trip returns.
	wr := &bodyWriter{c: c, rec: &readRecorder{rc: req.Body}, owner: s.owner(), done: make(chan error, 1)}
	go func() {
		err := s.write(bw, wr.rec)
		u.pool.putWriter(bw)
		if err != nil && wr.rec.err != nil && !errors.Is(wr.rec.err, errBodyStopped) {
			_ = c.SetDeadline(aLongTimeAgo)
		}
		wr.done <- err
	}()
	return wr
}

// end returns the writer's error once it has ended. A writer still running
// is stopped first: no more of the body is read, its write to the
// upstream is cut, and a read of the client's body in progress is cut
// (ownedBody.end); without an owner the body is closed, as a RoundTripper
// may. The upstream then has part of the body: c must not be reused.
func (w *bodyWriter) end() error {
	if w.ended {
		return w.err
	}
	w.ended = true
	select {
	case w.err = <-w.done:
		return w.err
	default:
	}
	w.stopped = true
	w.rec.stopped.Store(true)
	_ = w.c.SetWriteDeadline(aLongTimeAgo)
	if w.owner != nil {
		w.owner.end()
	} else {
		_ = w.rec.rc.Close()
	}
	w.err = <-w.done
	return w.err
}

// stoppedErr reports whether err is what stopping the writer, or closing
// its connection, gave it rather than a failure of its own.
func (w *bodyWriter) stoppedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, errBodyStopped) ||
		(w.stopped && errors.Is(err, os.ErrDeadlineExceeded))
}

// readResponse reads the final response to req from c, passing any 1xx
// informational responses to s. The 1xx heads count against the same
// header budget as the final head: an upstream cannot stretch one answer
// past it with informational responses.
func readResponse(c *upConn, req *http.Request, s sender) (*http.Response, error) {
	for n := 0; ; n++ {
		res, handled, err := readPlainResponse(c.br, req, s.block())
		if !handled {
			res, err = http.ReadResponse(c.br, req)
		}
		if err != nil {
			return nil, err
		}
		code := res.StatusCode
		if code == http.StatusSwitchingProtocols {
			return nil, errUnexpected101
		}
		if code < 100 || code > 199 {
			c.headerLeft = -1
			return res, nil
		}
		if n == max1xx {
			return nil, errTooMany1xx
		}
		if err := s.got1xx(code, res.Header); err != nil {
			return nil, err
		}
	}
}

// reqSender sends an *http.Request (ReverseProxy's outbound request),
// and passes 1xx responses to its trace, from which ReverseProxy relays
// them to the client.
type reqSender struct{ req *http.Request }

func (s reqSender) start(*bufio.Writer) error { return nil }

func (s reqSender) closes() bool { return s.req.Close }

func (s reqSender) block() *headBlock { return nil }

func (s reqSender) owner() *ownedBody {
	if route := routeFrom(s.req.Context()); route != nil {
		return route.body
	}
	return nil
}

func (s reqSender) write(bw *bufio.Writer, body io.ReadCloser) error {
	if body == nil {
		return writeRequest(s.req, bw)
	}
	out := *s.req
	out.Body = body
	return writeRequest(&out, bw)
}

func (s reqSender) got1xx(code int, h http.Header) error {
	if trace := httptrace.ContextClientTrace(s.req.Context()); trace != nil && trace.Got1xxResponse != nil {
		return trace.Got1xxResponse(code, textproto.MIMEHeader(h))
	}
	return nil
}

// upBody is a response body that gives its connection back to the pool
// once read to its end, and closes the connection when closed before.
type upBody struct {
	pool     *connPool
	c        *upConn
	rc       io.ReadCloser // the body as http.ReadResponse framed it
	stop     func() bool   // ends the context watch
	wr       *bodyWriter   // the request body's writer; nil: none
	reusable bool          // the response leaves the connection open
	over     atomic.Bool   // finish ran
	eof      bool
}

var errBodyClosed = errors.New("read on a closed response body")

// Read reads the body; at its end the connection goes back to the pool.
func (b *upBody) Read(p []byte) (int, error) {
	if b.over.Load() {
		if b.eof {
			return 0, io.EOF
		}
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
		b.finish(true)
	case err != nil:
		b.finish(false)
	}
	return n, err
}

// Close ends the exchange. Before the end of the body the connection is
// closed: the rest of the body is never read (net/http's own Close of a
// response body would read it all).
func (b *upBody) Close() error {
	b.finish(false)
	return nil
}

// finish ends the exchange once, and with it the request body's writer
// (bodyWriter.end: one that still runs, the upstream having answered
// before it read the whole body, is stopped). The connection goes back to
// the pool when complete is true, the response allows it, the request was
// written whole and the context never fired; else it is closed.
func (b *upBody) finish(complete bool) {
	if !b.over.CompareAndSwap(false, true) {
		return
	}
	ok := b.stop() && complete && b.reusable
	if b.wr != nil {
		err := b.wr.end()
		ok = ok && err == nil
		if ok && b.wr.stopped {
			_ = b.c.SetWriteDeadline(time.Time{}) // it ended well before the stop took
		}
	}
	if ok {
		b.pool.put(b.c)
		return
	}
	_ = b.c.Close()
}

// readRecorder keeps the first read error of a request body other than
// io.EOF, and refuses reads once its writer is stopped. It is read by one
// goroutine, which also writes err; err is read after that goroutine ended.
type readRecorder struct {
	rc      io.ReadCloser
	err     error
	stopped atomic.Bool
}

func (r *readRecorder) Read(p []byte) (int, error) {
	if r.stopped.Load() {
		return 0, errBodyStopped
	}
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *readRecorder) Close() error { return r.rc.Close() }

var _ http.RoundTripper = (*forwarder)(nil)
