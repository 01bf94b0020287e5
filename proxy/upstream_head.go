package proxy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/internal/h1head"
)

// readPlainResponse reads the common response on its own: a final status
// (200 to 599 but 204 and 304) on HTTP/1.1 to a request that is not HEAD,
// with a plain head (internal/h1head) already in br, one Content-Length and
// no Transfer-Encoding. It makes the same *http.Response as
// http.ReadResponse (TestPlainResponseMatchesNetHTTP) with fewer
// allocations. handled false: nothing was consumed, read it with
// http.ReadResponse. A failed first read is returned as ReadResponse
// would return it.
func readPlainResponse(br *bufio.Reader, req *http.Request) (res *http.Response, handled bool, err error) {
	if req.Method == http.MethodHead {
		return nil, false, nil
	}
	if _, err := br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, true, err
	}
	buf, _ := br.Peek(br.Buffered())
	n := h1head.End(buf)
	if n <= 0 {
		return nil, false, nil
	}
	s := string(buf[:n])
	line, rest, _ := strings.Cut(s, "\r\n")
	proto, status, _ := strings.Cut(line, " ")
	if proto != "HTTP/1.1" || len(status) < 3 || (len(status) > 3 && status[3] != ' ') ||
		!h1head.ValidValue(status) {
		return nil, false, nil
	}
	code := 0
	for i := range 3 {
		c := status[i]
		if c < '0' || c > '9' {
			return nil, false, nil
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil, false, nil
	}
	length, cls := int64(-1), 0
	closes := false
	hdr, ok := h1head.Fields(rest, func(key, v string) (keep, ok bool) {
		switch key {
		case "Content-Length":
			cls++
			length, ok = h1head.Length(v)
			return true, ok && cls == 1
		case "Transfer-Encoding":
			return false, false
		case "Connection":
			closes = closes || h1head.HasClose(v)
		}
		return true, true
	})
	if !ok || length < 0 {
		return nil, false, nil
	}
	if closes {
		hdr.Del("Connection") // as http.ReadResponse does
	}
	_, _ = br.Discard(n)
	pr := &plainResponse{res: http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		ContentLength: length,
		Close:         closes,
		Request:       req,
	}}
	res = &pr.res
	if length == 0 {
		res.Body = http.NoBody
	} else {
		pr.body = lengthBody{br: br, left: length}
		res.Body = &pr.body
	}
	return res, true, nil
}

// plainResponse holds a response and its body in one allocation.
type plainResponse struct {
	res  http.Response
	body lengthBody
}

// lengthBody is a response body of known length read from the upstream
// connection's reader; the last bytes come with io.EOF, and a body cut
// short ends in io.ErrUnexpectedEOF.
type lengthBody struct {
	br   *bufio.Reader
	left int64
}

func (b *lengthBody) Read(p []byte) (int, error) { return h1head.ReadBody(b.br, p, &b.left) }

// Close leaves the rest unread: the forwarder's body closes the
// connection when the body did not end.
func (b *lengthBody) Close() error { return nil }
