package h1client

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

// Forwarder forwards a plain HTTP/1.1 request on the calling goroutine: it
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
type Forwarder struct {
	pool *Pool
	// headerTimeout bounds waiting for the response headers; zero: none.
	headerTimeout time.Duration
	fallback      http.RoundTripper
	// owner finds, in an outbound request's context, its body as the
	// server owns it (OwnedBody); nil: none.
	owner func(ctx context.Context) *OwnedBody
}

// NewForwarder returns a Forwarder on pool whose response headers must
// arrive within headerTimeout (zero: no bound), which hands what it does
// not carry to fallback. owner finds the body of a request RoundTrip
// forwards as its server owns it (nil: none).
func NewForwarder(pool *Pool, headerTimeout time.Duration, fallback http.RoundTripper,
	owner func(ctx context.Context) *OwnedBody) *Forwarder {
	return &Forwarder{pool: pool, headerTimeout: headerTimeout, fallback: fallback, owner: owner}
}

// Max1xx is how many informational responses one request may get before
// its final one, as in net/http.
const Max1xx = 5

// aLongTimeAgo is a deadline in the past, which interrupts a blocked read
// or write at once.
var aLongTimeAgo = time.Unix(1, 0)

var (
	errTooMany1xx    = errors.New("too many 1xx informational responses from the upstream")
	errUnexpected101 = errors.New("upstream switched protocols on a request that asked for no upgrade")
)

// Pool is the pool of connections the forwarder takes from.
func (u *Forwarder) Pool() *Pool { return u.pool }

// RoundTrip forwards req and returns the upstream's response.
func (u *Forwarder) RoundTrip(req *http.Request) (*http.Response, error) {
	if !plainHTTP1(req) {
		return fallback(u.fallback, req)
	}
	res, err := u.Send(req.Context(), HostPort(req.URL), req, reqSender{req: req, owner: u.owner})
	if ns, ok := err.(NotSent); ok {
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
		err = &PartialAnswer{err}
	}
	return res, err
}

// Sender writes one outbound request: the forwarder's RoundTrip sends an
// *http.Request (reqSender), the direct path writes the head straight from
// the inbound request (direct.go).
type Sender interface {
	// Start writes, on the round trip's goroutine, what may be written
	// before the body: the direct path's head, nothing for reqSender.
	Start(bw *bufio.Writer) error
	// Write writes the rest of the request to bw and flushes it. body is
	// the request body to send (through the exchange's recorder), nil for
	// none; with a body, write runs on a goroutine of its own.
	Write(bw *bufio.Writer, body io.ReadCloser) error
	// Got1xx passes an informational response on.
	Got1xx(code int, h http.Header) error
	// Closes reports whether the request asks the upstream to close the
	// connection after the response.
	Closes() bool
	// Owner is the request body as Serve owns it (body.go), nil for a
	// request that did not come through Serve.
	Owner() *OwnedBody
	// Block is where a plain response's fields go as wire bytes
	// (HeadBlock); nil: into a header map.
	Block() *HeadBlock
}

// NotSent marks a failure to get a connection (nothing of the request
// was sent); the callers of send unwrap it.
type NotSent struct{ error }

// Unwrap is the failure to get a connection.
func (e NotSent) Unwrap() error { return e.error }

// send carries req, written by s, to addr: on an idle pooled connection
// or a new one, and once more on a fresh connection when a reused one
// turns out stale (staleRetry). req gives the method, body and header
// that the response framing and the retry rule read.
func (u *Forwarder) Send(ctx context.Context, addr string, req *http.Request, s Sender) (*http.Response, error) {
	c, err := u.pool.get(ctx, addr)
	for retried := false; ; retried = true {
		if err != nil {
			return nil, NotSent{err}
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

// HostPort is the address to dial for u.
func HostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func HasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

func closeRequestBody(req *http.Request) {
	if HasBody(req) {
		_ = req.Body.Close()
	}
}

// staleRetry reports whether req, which failed with err on c, may be sent
// again on a fresh connection: c was reused, the upstream sent nothing
// back (not one byte: a 1xx is an answer, passed on already) and did not
// merely time out, and either nothing of req was written or req is
// idempotent with no body.
func staleRetry(req *http.Request, c *upConn, err error) bool {
	if !c.reused || c.answered || timeout(err) || HasBody(req) {
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
func (u *Forwarder) exchange(ctx context.Context, c *upConn, req *http.Request, s Sender) (*http.Response, error) {
	c.written = 0
	c.headerLeft = MaxResponseHeaderBytes
	c.answered = false
	stop := ctxhook.AfterFunc(ctx, c.interrupt)
	var wr *bodyWriter
	bw := u.pool.writer(c)
	if err := s.Start(bw); err != nil {
		u.pool.putWriter(bw)
		return nil, u.fail(ctx, c, stop, nil, err)
	}
	if HasBody(req) {
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
		err := s.Write(bw, nil)
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
			err = &PartialAnswer{err}
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
	b := &upBody{pool: u.pool, c: c, stop: stop, wr: wr, reusable: !res.Close && !s.Closes()}
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

// PartialAnswer is the failure of an exchange whose upstream had already
// sent something back (a 1xx, part of a head): the request reached it and
// was acted on, so it is never sent again (unreached is false for it).
type PartialAnswer struct{ error }

func (e *PartialAnswer) Unwrap() error { return e.error }

// fail closes c after a failed exchange, ends its body writer (wr, nil for
// none), and returns the error to report: the context's when the caller
// went away, else the request write's when the write failed on its own,
// else err.
func (u *Forwarder) fail(ctx context.Context, c *upConn, stop func() bool, wr *bodyWriter, err error) error {
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
	owner   *OwnedBody // nil for a request that did not come through Serve
	done    chan error
	err     error
	ended   bool
	stopped bool // end had to stop it: c's write deadline is in the past
}

// startWriter starts writing req's body, with s, through bw on c.
func (u *Forwarder) startWriter(c *upConn, bw *bufio.Writer, req *http.Request, s Sender) *bodyWriter {
	// The body is read through a recorder: when reading the caller's body
	// fails (a malformed chunk, a cut connection), the upstream waits for
	// a body that never comes, so the exchange is cut at once and the read
	// error is what the round trip returns.
	wr := &bodyWriter{c: c, rec: &readRecorder{rc: req.Body}, owner: s.Owner(), done: make(chan error, 1)}
	go func() {
		err := s.Write(bw, wr.rec)
		u.pool.putWriter(bw)
		if err != nil && wr.rec.err != nil && !errors.Is(wr.rec.err, ErrBodyStopped) {
			_ = c.SetDeadline(aLongTimeAgo)
		}
		wr.done <- err
	}()
	return wr
}

// end returns the writer's error once it has ended. A writer still running
// is stopped first: no more of the body is read, its write to the
// upstream is cut, and a read of the client's body in progress is cut
// (OwnedBody.End); without an owner the body is closed, as a RoundTripper
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
		w.owner.End()
	} else {
		_ = w.rec.rc.Close()
	}
	w.err = <-w.done
	return w.err
}

// stoppedErr reports whether err is what stopping the writer, or closing
// its connection, gave it rather than a failure of its own.
func (w *bodyWriter) stoppedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, ErrBodyStopped) ||
		(w.stopped && errors.Is(err, os.ErrDeadlineExceeded))
}

// readResponse reads the final response to req from c, passing any 1xx
// informational responses to s. The 1xx heads count against the same
// header budget as the final head: an upstream cannot stretch one answer
// past it with informational responses.
func readResponse(c *upConn, req *http.Request, s Sender) (*http.Response, error) {
	for n := 0; ; n++ {
		res, handled, err := readPlainResponse(c.br, req, s.Block())
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
		if n == Max1xx {
			return nil, errTooMany1xx
		}
		if err := s.Got1xx(code, res.Header); err != nil {
			return nil, err
		}
	}
}

// reqSender sends an *http.Request (ReverseProxy's outbound request),
// and passes 1xx responses to its trace, from which ReverseProxy relays
// them to the client.
type reqSender struct {
	req   *http.Request
	owner func(ctx context.Context) *OwnedBody
}

func (s reqSender) Start(*bufio.Writer) error { return nil }

func (s reqSender) Closes() bool { return s.req.Close }

func (s reqSender) Block() *HeadBlock { return nil }

func (s reqSender) Owner() *OwnedBody {
	if s.owner == nil {
		return nil
	}
	return s.owner(s.req.Context())
}

func (s reqSender) Write(bw *bufio.Writer, body io.ReadCloser) error {
	if body == nil {
		return writeRequest(s.req, bw)
	}
	out := *s.req
	out.Body = body
	return writeRequest(&out, bw)
}

func (s reqSender) Got1xx(code int, h http.Header) error {
	if trace := httptrace.ContextClientTrace(s.req.Context()); trace != nil && trace.Got1xxResponse != nil {
		return trace.Got1xxResponse(code, textproto.MIMEHeader(h))
	}
	return nil
}

// upBody is a response body that gives its connection back to the pool
// once read to its end, and closes the connection when closed before.
type upBody struct {
	pool     *Pool
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
		return 0, ErrBodyStopped
	}
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *readRecorder) Close() error { return r.rc.Close() }

var _ http.RoundTripper = (*Forwarder)(nil)

// timeout reports whether err is a timeout.
func timeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Splice sends the body of res, a response the Forwarder read, from the
// upstream's connection through rf (the client writer's ReadFrom, w's
// own), when that connection is a TCP or Unix stream: what its reader
// holds already is written to w first, then the rest of the body's
// length, res.ContentLength, is read from the connection itself, the
// body's framing reader bypassed for good. ok false: nothing was done (a
// body of another kind, or another connection); copy the body. Otherwise
// err is the failure of the copy; on success the connection is back in
// the pool, having given exactly the body's length.
func Splice(w io.Writer, rf io.ReaderFrom, res *http.Response) (ok bool, err error) {
	b, isUp := res.Body.(*upBody)
	if !isUp {
		return false, nil
	}
	// A TCP or Unix stream connection: the kernel splices from either
	// (a home on {socket} is reached over the latter).
	var src io.Reader
	switch c := b.c.Conn.(type) {
	case *net.TCPConn:
		src = c
	case *net.UnixConn:
		src = c
	}
	if src == nil {
		return false, nil
	}
	left := res.ContentLength
	// What the connection's reader already holds goes first; the body's
	// framing reader is bypassed for good.
	if k := min(int64(b.c.br.Buffered()), left); k > 0 {
		p, _ := b.c.br.Peek(int(k))
		n, werr := w.Write(p)
		_, _ = b.c.br.Discard(n)
		left -= int64(n)
		if werr != nil {
			return true, werr
		}
	}
	n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: left})
	if err == nil && n != left {
		err = io.ErrUnexpectedEOF // the upstream closed before the end
	}
	if err != nil {
		return true, err
	}
	b.eof = true
	b.finish(true)
	return true, nil
}
