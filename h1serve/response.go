package h1serve

import (
	"bufio"
	"io"
	"net/http"
	"net/textproto"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/wakegate/wakegate/internal/h1head"
)

// response is the http.ResponseWriter of a request served here. It keeps
// net/http's rules (TestResponsesMatchNetHTTP): the head is fixed when
// WriteHeader is called (later changes to the header map are not sent,
// except trailers), and sent with the first 2 KiB of body, or at the end:
// a handler that ends without flushing and without a Content-Length gets
// one; a body of unknown length is chunked; a body without Content-Type
// is sniffed; Date is added; Connection: close is sent when the
// connection will close.
type response struct {
	c       *conn
	req     *http.Request
	reqBody *body // the request's body as served, whatever the handler put in req.Body
	header  http.Header

	status      int
	wroteHeader bool // a final status is set and the head fixed
	headSent    bool // the head is in c.bw
	handlerDone bool

	contentLength int64 // declared, or -1
	hadCL         bool  // WriteHeader saw a Content-Length, valid or not
	written       int64
	chunking      bool
	closeAfter    bool
	werr          error // a write to the client failed

	// what WriteHeader saw of the header map
	haveType, haveDate, sniffable bool
	te                            string
	connection                    []string // the Connection values, sent or replaced at the end
	trailers                      []string // declared trailer names
	prefixTrailers                bool     // a key with http.TrailerPrefix was set
	pend                          []byte   // body held back before the head is sent (c.pend)
}

// bufferBeforeHead is how much body is held back before the head is sent,
// as net/http does: a short response that ends gets a Content-Length.
const bufferBeforeHead = 2048

// maxPostHandlerRead is how much of an unread request body is drained so
// the connection can be reused (net/http's limit).
const maxPostHandlerRead = 256 << 10

// sniffLen is how much of a body http.DetectContentType looks at.
const sniffLen = 512

func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the status. A 1xx other than 101 is sent at once with
// the header fields set so far; a final status fixes the head.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.c.s.logf("h1serve: superfluous response.WriteHeader call (status %d)", code)
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		bw := w.c.bw
		writeStatusLine(bw, code)
		writeFields(bw, w.header, exContentLength|exTE)
		_, _ = bw.WriteString("\r\n")
		w.noteErr(bw.Flush())
		return
	}
	w.wroteHeader = true
	w.status = code
	h := w.header
	if cl := h.Get("Content-Length"); cl != "" {
		w.hadCL = true
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.s.logf("h1serve: invalid Content-Length of %q", cl)
			h.Del("Content-Length")
		}
	}
	w.fixHead(nil)
}

// WriteHeaderBlock is WriteHeader for a final status with a body whose
// fields, but those set in the header map, come as wire bytes (a proxy
// relaying an upstream's head, h1head.Block): they are sent after the
// map's, and b.Length is the response's Content-Length. It reports false,
// and does nothing, when the head is fixed already, code is not a final
// status that carries a body, the request is HEAD, or the map holds a
// field that decides the framing (Content-Length, Transfer-Encoding,
// Trailer, Connection, a trailer key): the caller then puts the fields in
// the map and calls WriteHeader. b is not kept.
func (w *response) WriteHeaderBlock(code int, b *h1head.Block) bool {
	if w.wroteHeader || code < 200 || code > 999 || !bodyAllowed(code) || w.req.Method == http.MethodHead ||
		b.Length < 0 {
		return false
	}
	h := w.header
	if len(h) > 0 {
		for k := range h {
			switch k {
			case "Content-Length", "Transfer-Encoding", "Trailer", "Connection":
				return false
			}
			if strings.HasPrefix(k, http.TrailerPrefix) {
				return false
			}
		}
	}
	w.wroteHeader = true
	w.status = code
	w.hadCL = true
	w.contentLength = b.Length
	w.fixHead(b)
	return true
}

// fixHead writes the header map, as it is now, and the block b (nil for
// none) into the connection's head buffer, leaving out what the end of
// the response decides (Connection) and what the status or framing
// forbids; it notes what sendHead needs.
func (w *response) fixHead(b *h1head.Block) {
	h := w.header
	_, w.haveType = h["Content-Type"]
	_, w.haveDate = h["Date"]
	w.te = h.Get("Transfer-Encoding")
	hasCE := h.Get("Content-Encoding") != ""
	if b != nil {
		w.haveType = w.haveType || b.Type
		w.haveDate = w.haveDate || b.Date
		if _, mapCE := h["Content-Encoding"]; !mapCE {
			hasCE = b.Encoded
		}
	}
	bodyOK := bodyAllowed(w.status)
	w.sniffable = bodyOK && !hasCE && !w.haveType && w.te == ""
	if c := h["Connection"]; len(c) > 0 {
		w.connection = append(w.c.connBuf[:0], c...)
		w.c.connBuf = w.connection
	}
	var ex exclusion
	ex |= exConnection
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			w.prefixTrailers = true
		}
	}
	for _, v := range h["Trailer"] {
		for _, f := range strings.Split(v, ",") {
			f = http.CanonicalHeaderKey(strings.TrimSpace(f))
			switch f {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				w.trailers = append(w.trailers, f)
			}
		}
	}
	hasCL := w.contentLength != -1
	switch {
	case w.status == http.StatusNotModified:
		ex |= exContentType | exContentLength | exTE
	case !bodyOK:
		ex |= exContentLength | exTE
	}
	if hasCL && w.te != "" && w.te != "identity" {
		ex |= exContentLength
		w.contentLength = -1
	}
	if w.req.Method == http.MethodHead || !bodyOK || w.contentLength != -1 || w.te == "identity" || w.te == "chunked" {
		ex |= exTE
	}
	if w.prefixTrailers {
		ex |= exTrailerPrefix
	}
	bw := &w.c.head
	bw.Reset()
	writeStatusLine(bw, w.status)
	writeFields(bw, h, ex)
	if b != nil {
		_, _ = bw.Write(b.Fields)
	}
}

// Write writes body bytes, holding the first 2 KiB back until the head
// is sent.
func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if w.werr != nil {
		return 0, w.werr
	}
	if !w.headSent {
		if len(w.pend)+len(p) <= bufferBeforeHead {
			w.pend = append(w.pend, p...)
			return len(p), nil
		}
		first := p
		if n := len(w.pend); n > 0 {
			first = w.pend
			if w.sniffable && n < sniffLen {
				// what net/http sniffs: the held-back bytes and the
				// start of this write
				first = append(first[:n:n], p[:min(len(p), sniffLen-n)]...)
			}
		}
		w.sendHead(first)
		w.writeBody(w.pend)
		w.pend = w.pend[:0]
	}
	w.writeBody(p)
	if w.werr != nil {
		return 0, w.werr
	}
	return len(p), nil
}

// WriteString is Write for a string, as io.StringWriter; a string that
// is held back whole is not copied twice.
func (w *response) WriteString(s string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent && len(w.pend)+len(s) <= bufferBeforeHead && bodyAllowed(w.status) &&
		(w.contentLength == -1 || w.written+int64(len(s)) <= w.contentLength) && w.werr == nil {
		w.written += int64(len(s))
		w.pend = append(w.pend, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// writeBody writes body bytes after the head, as a chunk when chunking.
func (w *response) writeBody(p []byte) {
	if len(p) == 0 || w.werr != nil || w.req.Method == http.MethodHead {
		return
	}
	bw := w.c.bw
	if w.chunking {
		var b [20]byte
		_, _ = bw.Write(strconv.AppendInt(b[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, err := bw.WriteString("\r\n")
		w.noteErr(err)
		return
	}
	_, err := bw.Write(p)
	w.noteErr(err)
}

func (w *response) noteErr(err error) {
	if err != nil && w.werr == nil {
		w.werr = err
	}
}

// sendHead writes the head into the connection's writer. p is the start
// of the body (for sniffing, and as the whole body once the handler is
// done).
func (w *response) sendHead(p []byte) {
	if w.headSent {
		return
	}
	w.headSent = true
	c := w.c
	trailers := len(w.trailers) > 0 || w.prefixTrailers
	addCL := false
	if w.handlerDone && !trailers && w.te == "" && bodyAllowed(w.status) && !w.hadCL &&
		(w.req.Method != http.MethodHead || len(p) > 0) {
		w.contentLength = int64(len(p))
		addCL = true
	}
	if w.req.Close || c.s.shuttingDown() || hasToken(w.connection, "close") {
		w.closeAfter = true
	}
	if w.req.ContentLength != 0 && !w.closeAfter {
		w.drainBody()
	}
	bw := c.bw
	_, _ = bw.Write(c.head.Bytes())
	if !w.haveDate {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(c.s.date.get())
		_, _ = bw.WriteString("\r\n")
	}
	isHEAD := w.req.Method == http.MethodHead
	bodyOK := bodyAllowed(w.status)
	switch {
	case isHEAD || !bodyOK || w.status == http.StatusNoContent:
	case w.contentLength != -1:
	case w.te == "identity":
		w.closeAfter = true
	default:
		w.chunking = true
	}
	if addCL {
		var b [20]byte
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(strconv.AppendInt(b[:0], w.contentLength, 10))
		_, _ = bw.WriteString("\r\n")
	}
	if w.sniffable && bodyOK && len(p) > 0 {
		_, _ = bw.WriteString("Content-Type: ")
		_, _ = bw.WriteString(http.DetectContentType(p))
		_, _ = bw.WriteString("\r\n")
	}
	switching := w.status == http.StatusSwitchingProtocols && w.header.Get("Upgrade") != ""
	if w.closeAfter && !switching &&
		(c.s.shuttingDown() || !hasToken(w.connection, "close")) {
		_, _ = bw.WriteString("Connection: close\r\n")
	} else {
		for _, v := range w.connection {
			_, _ = bw.WriteString("Connection: ")
			_, _ = bw.WriteString(headerValue(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
	if w.chunking {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	_, err := bw.WriteString("\r\n")
	w.noteErr(err)
}

// drainBody reads what the handler left of the request body, up to
// maxPostHandlerRead, so that the connection can take the next request;
// past that, or on a read error, the connection closes after the reply.
// A goroutine of the handler still reading the body waits for it, or it
// for that goroutine (body.mu): each byte goes to one of them.
func (w *response) drainBody() {
	if b := w.reqBody; b != nil && !b.drain() {
		w.closeAfter = true
	}
}

// Flush sends the head and what is buffered.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush that reports a failed write (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		w.sendHead(w.pend)
		w.writeBody(w.pend)
		w.pend = w.pend[:0]
	}
	if w.werr == nil {
		w.noteErr(w.c.bw.Flush())
	}
	return w.werr
}

// ReadFrom sends a body from src. Toward a plain TCP connection with a
// known length (not chunked) it hands the copy to the connection's
// ReadFrom, which splices from a TCP source.
func (w *response) ReadFrom(src io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	rf, isRF := w.c.rwc.(io.ReaderFrom)
	if !isRF || (!w.headSent && w.sniffable) || w.contentLength == -1 ||
		w.req.Method == http.MethodHead || !bodyAllowed(w.status) {
		return io.Copy(writerOnly{w}, src)
	}
	if err := w.FlushError(); err != nil {
		return 0, err
	}
	if w.c.fl.on {
		// A timed-out splice of net's loses bytes: the floor's own one
		// keeps them, or the body is copied under the floor.
		n, handled, err := w.c.floorSplice(src)
		if !handled {
			return io.Copy(writerOnly{w}, src)
		}
		w.written += n
		w.noteErr(err)
		return n, err
	}
	n, err := rf.ReadFrom(src)
	w.written += n
	w.noteErr(err)
	return n, err
}

// SetReadDeadline sets the connection's read deadline
// (http.ResponseController).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.setReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline
// (http.ResponseController).
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.setWriteDeadline(t) }

// Serves reports whether w is the loop's own response writer, as a
// handler gets it: the request came through the loop, which takes only a
// head with one framing (a Content-Length or none) and hands any other to
// net/http before a handler sees it.
func Serves(w http.ResponseWriter) bool {
	_, ok := w.(*response)
	return ok
}

// SetWriteFloor makes the client take the rest of this response at rate
// bytes per second at least, with grace as the time it may fall behind
// (floor.go): a client that falls further behind is cut, its write fails
// with os.ErrDeadlineExceeded. The floor ends with the response. It
// returns false, and does nothing, where a timed-out write cannot go on
// (a connection that is not plain TCP); the caller then keeps its own
// deadlines.
func (w *response) SetWriteFloor(rate int64, grace time.Duration) bool {
	return w.c.startFloor(rate, grace)
}

// finish ends the response once the handler has returned: the head if
// it is not sent, the held-back body, the last chunk and trailers, and a
// flush. It reports whether the connection can take another request.
func (w *response) finish() (reuse bool) {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		w.sendHead(w.pend)
		w.writeBody(w.pend)
	}
	if w.chunking && w.werr == nil {
		bw := w.c.bw
		_, _ = bw.WriteString("0\r\n")
		w.writeTrailers(bw)
		_, _ = bw.WriteString("\r\n")
	}
	if w.werr == nil {
		if w.c.bw.Buffered() > 0 {
			// Let the other runnable connections reach this point first,
			// so that under load the answers leave in a burst. A client
			// on this host (a sidecar, a local balancer, a load
			// generator) then wakes once per burst, not once per answer,
			// and each wake-up is paid by the writer. With nothing else
			// runnable this returns at once.
			runtime.Gosched()
		}
		w.noteErr(w.c.bw.Flush())
	}
	if w.werr != nil || w.closeAfter {
		return false
	}
	if w.req.Method != http.MethodHead && w.contentLength != -1 && bodyAllowed(w.status) &&
		w.contentLength != w.written {
		return false // the handler wrote less than it announced
	}
	return true
}

// writeTrailers writes the declared trailers and the http.TrailerPrefix
// ones, as net/http does.
func (w *response) writeTrailers(bw *bufio.Writer) {
	var t http.Header
	for _, k := range w.trailers {
		if vv, ok := w.header[k]; ok {
			if t == nil {
				t = make(http.Header)
			}
			t[k] = vv
		}
	}
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if t == nil {
				t = make(http.Header)
			}
			for _, v := range vv {
				t.Add(name, v)
			}
		}
	}
	if t != nil {
		_ = t.Write(bw)
	}
}

// stringByteWriter is what a status line is written to: the
// connection's writer, or the buffer its head is built in.
type stringByteWriter interface {
	io.ByteWriter
	io.StringWriter
}

// writeStatusLine writes "HTTP/1.1 code text\r\n" for code, which
// WriteHeader has kept to three digits.
func writeStatusLine(bw stringByteWriter, code int) {
	_, _ = bw.WriteString("HTTP/1.1 ")
	writeCode(bw, code)
	if text := http.StatusText(code); text != "" {
		_ = bw.WriteByte(' ')
		_, _ = bw.WriteString(text)
		_, _ = bw.WriteString("\r\n")
		return
	}
	_, _ = bw.WriteString(" status code ")
	writeCode(bw, code)
	_, _ = bw.WriteString("\r\n")
}

// writeCode writes a three-digit status code byte by byte: a digit
// buffer handed to the writer's interface would be allocated on every
// response.
func writeCode(bw io.ByteWriter, code int) {
	_ = bw.WriteByte(byte('0' + code/100%10))
	_ = bw.WriteByte(byte('0' + code/10%10))
	_ = bw.WriteByte(byte('0' + code%10))
}

// bodyAllowed reports whether a status may carry a body (RFC 9112).
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

func hasToken(values []string, token string) bool {
	return len(values) > 0 && httpguts.HeaderValuesContainsToken(values, token)
}

// headerValue is a value as net/http writes it: CR and LF made spaces,
// white space trimmed.
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, v)
	}
	return textproto.TrimString(v)
}

// writerOnly hides ReadFrom so io.Copy uses Write.
type writerOnly struct{ io.Writer }

// exclusion is a set of the fields a head leaves out.
type exclusion uint8

const (
	exConnection exclusion = 1 << iota
	exContentLength
	exContentType
	exTE
	exTrailerPrefix // keys with http.TrailerPrefix
)

// excludes reports whether the exclusion leaves key out.
func (e exclusion) excludes(key string) bool {
	switch key {
	case "Connection":
		return e&exConnection != 0
	case "Content-Length":
		return e&exContentLength != 0
	case "Content-Type":
		return e&exContentType != 0
	case "Transfer-Encoding":
		return e&exTE != 0
	}
	return e&exTrailerPrefix != 0 && strings.HasPrefix(key, http.TrailerPrefix)
}

// writeFields writes the fields of h but the excluded ones, as
// http.Header.WriteSubset does (a name that is not a valid field name is
// skipped, values are cleaned by headerValue) but in the map's order: a
// head's field order carries no meaning, and sorting is the larger part
// of WriteSubset's cost.
func writeFields(bw stringByteWriter, h http.Header, ex exclusion) {
	for k, vv := range h {
		if ex.excludes(k) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			_, _ = bw.WriteString(headerValue(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
}
