package h1client

import (
	"bufio"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/textproto"
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
//
// With blk, the fields go into blk instead of a header map (HeadBlock),
// and the response's Header is nil.
func readPlainResponse(br *bufio.Reader, req *http.Request, blk *HeadBlock) (res *http.Response, handled bool, err error) {
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
	var hdr http.Header
	var length int64
	var closes bool
	if blk != nil {
		length, closes = blk.read(rest)
	} else {
		hdr, length, closes = readFields(rest)
	}
	if length < 0 {
		return nil, false, nil
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

// plainFraming follows the fields of a plain response head that frame its
// body: exactly one Content-Length and no Transfer-Encoding.
type plainFraming struct {
	length int64 // -1 until a Content-Length is read
	cls    int
}

// field notes the field key (canonical) with value v. framing false: key
// does not frame the body. ok false: the head is not plain.
func (f *plainFraming) field(key, v string) (framing, ok bool) {
	switch key {
	case "Content-Length":
		f.cls++
		f.length, ok = h1head.Length(v)
		return true, ok && f.cls == 1
	case "Transfer-Encoding":
		return true, false
	}
	return false, true
}

// readFields reads the field lines of a plain head into a header map, as
// http.ReadResponse would: the length is -1 when the fields are not
// plain, or frame the body otherwise than by one Content-Length.
func readFields(rest string) (hdr http.Header, length int64, closes bool) {
	f := plainFraming{length: -1}
	hdr, ok := h1head.Fields(rest, func(key, v string) (keep, ok bool) {
		if framing, ok := f.field(key, v); framing {
			return true, ok
		}
		if key == "Connection" {
			closes = closes || h1head.HasClose(v)
		}
		return true, true
	})
	if !ok {
		return nil, -1, false
	}
	if closes {
		hdr.Del("Connection") // as http.ReadResponse does
	}
	return hdr, f.length, closes
}

// HeadBlock is where the direct path has a plain response's fields go
// when its client's writer takes them as wire bytes (h1serve's): the
// fields the answer would keep, with the hop-by-hop ones and the
// stripped ones left out already, as answer leaves them in a map.
type HeadBlock struct {
	h1head.Block
	// Stripped are the canonical names the proxy strips from responses.
	Stripped []string
	// EventStream: the first Content-Type is text/event-stream.
	EventStream bool
	typeSeen    bool
	buf         [512]byte
}

// read appends the field lines of rest to b and returns the body's
// length, -1 when the head must be read into a map (not plain, framed
// otherwise than by one Content-Length, or a Connection that names a
// field to remove), and whether the upstream closes the connection.
func (b *HeadBlock) read(rest string) (length int64, closes bool) {
	if b.Fields == nil {
		b.Fields = b.buf[:0]
	}
	b.Reset()
	b.EventStream, b.typeSeen = false, false
	f := plainFraming{length: -1}
	ok := b.Append(rest, func(key []byte, v string) (keep, ok bool) {
		if framing, ok := f.field(string(key), v); framing {
			return true, ok
		}
		switch string(key) {
		case "Connection":
			// Only the tokens that name no other field: a Connection
			// that lists a field to remove goes the map's way.
			for t := range strings.SplitSeq(v, ",") {
				switch t = textproto.TrimString(t); {
				case strings.EqualFold(t, "close"):
					closes = true
				case t != "" && !strings.EqualFold(t, "keep-alive"):
					return false, false
				}
			}
			return false, true
		case "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade":
			return false, true // hop-by-hop (removeHopByHop)
		case "Content-Type":
			if !b.typeSeen {
				b.typeSeen, b.EventStream = true, EventStream(v)
			}
		}
		for _, s := range b.Stripped {
			if string(key) == s {
				return false, true
			}
		}
		return true, true
	})
	if !ok {
		return -1, false
	}
	b.Length = f.length
	return f.length, closes
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

// EventStream reports whether the media type of ct is text/event-stream.
func EventStream(ct string) bool {
	if !strings.Contains(strings.ToLower(ct), "event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/event-stream"
}

// hopHeaders are the hop-by-hop fields ReverseProxy removes.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// RemoveHopByHop removes from h the fields its Connection lists and the
// hop-by-hop ones.
func RemoveHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		h.Del(f)
	}
}
