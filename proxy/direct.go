package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wakegate/wakegate/internal/h1head"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// The direct path carries a plain request (no upgrade, no Expect, an http
// upstream) without ReverseProxy: on the handler's goroutine it writes the
// outbound head straight from the inbound request into the forwarder's
// pooled writer (no cloned request, no copied header map). The response's
// fields go to the client as wire bytes when its writer takes them so
// (BlockWriter: h1serve's loop), checked and cleaned as they are read
// (HeadBlock), and into the client's header map otherwise. What it sends
// and answers is what ReverseProxy with rewrite, the forwarder,
// modifyResponse, errorHandler and retryTransport send and answer; a
// request with anything unusual (a field that would need cleaning, a query
// ReverseProxy would re-encode, request trailers) takes ReverseProxy.

// direct reports whether r goes by the direct path.
func (p *Proxy) direct(r *http.Request, route *forwarding) bool {
	if p.noDirect || route.rel != nil || route.Upstream == nil || route.Upstream.Scheme != "http" ||
		r.URL.Opaque != "" || len(r.Trailer) > 0 || r.Method == http.MethodConnect || !h1client.PlainText(r.Method) {
		return false
	}
	if _, up := r.Header["Upgrade"]; up || r.Header.Get("Expect") != "" {
		return false
	}
	if h1client.HasBody(r) && (r.ContentLength == 0 || r.ContentLength < 0 && bodyless(r.Method)) {
		return false // the Transport would probe the body first
	}
	// The outbound Host goes on the wire as it is: one the Transport
	// would change (a zone, an IDN) or refuse takes ReverseProxy.
	host := route.out.host
	if strings.IndexByte(host, '%') >= 0 || !httpguts.ValidHostHeader(host) ||
		strings.IndexByte(route.Upstream.Host, '%') >= 0 ||
		!plainQuery(r.URL.RawQuery) || !h1client.PlainText(r.URL.RawQuery) || !h1client.PlainText(r.Host) {
		return false
	}
	if !h1client.PlainFields(r.Header) {
		return false
	}
	for _, v := range r.Header["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = textproto.TrimString(t); t != "" && !httpguts.ValidHeaderFieldName(t) {
				return false
			}
		}
	}
	return true
}

// bodyless reports whether requests of method usually have no body (the
// Transport's rule for a body of unknown length).
func bodyless(method string) bool {
	switch method {
	case "GET", "HEAD", "DELETE", "OPTIONS", "PROPFIND", "SEARCH":
		return true
	}
	return false
}

// plainQuery reports whether ReverseProxy keeps the raw query q as it is
// (cleanQueryParams re-encodes one with a ';' or a bad escape).
func plainQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return false
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

var newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// directReq is one request on the direct path: the Sender of its
// outbound request (h1client/forwarder.go).
type directReq struct {
	p     *Proxy
	w     http.ResponseWriter
	r     *http.Request
	route *forwarding
	// path and raw are the outbound path (forwarding.upstreamPath).
	path, raw string
	// length is the body's length, -1 for chunked; 0 without a body.
	length int64
	// blk holds the response's fields as wire bytes for a client writer
	// that takes them so (BlockWriter); nil: a header map.
	blk *h1client.HeadBlock
	bw  BlockWriter
}

// BlockWriter is a response writer that takes a relayed head's fields as
// wire bytes (h1serve's, and the route's recorder around it):
// WriteHeaderBlock is WriteHeader with the fields in b instead of the
// header map, false when it cannot take them (then nothing was done).
type BlockWriter interface {
	WriteHeaderBlock(code int, b *h1head.Block) bool
}

// serveDirect forwards r to route's upstream and answers w.
func (p *Proxy) serveDirect(w http.ResponseWriter, r *http.Request, route *forwarding) {
	d := &directReq{p: p, w: w, r: r, route: route}
	d.path, d.raw = route.upstreamPath(r.URL)
	if h1client.HasBody(r) {
		d.length = r.ContentLength
	}
	if bw := blockWriter(w); bw != nil && !p.noBlock && r.Method != http.MethodHead { // HEAD: never plain (readPlainResponse)
		d.bw = bw
		d.blk, _ = p.blocks.Get().(*h1client.HeadBlock)
		if d.blk == nil {
			d.blk = new(h1client.HeadBlock)
		}
		d.blk.Stripped = p.stripped
	}
	res, err := d.roundTrip()
	if err != nil {
		d.putBlock()
		p.answerError(w, r, route, d.path, err)
		return
	}
	d.answer(res)
}

// blockWriter returns w as a BlockWriter when the writer that sends the
// head takes blocks, else nil: every wrapper on the way (the route's
// recorder, the relay token's mask) passes blocks on, so each one it
// wraps must take them too (not net/http's writer, nor the rate writer).
func blockWriter(w http.ResponseWriter) BlockWriter {
	bw, ok := w.(BlockWriter)
	if !ok {
		return nil
	}
	for x := w; ; {
		u, wraps := x.(interface{ Unwrap() http.ResponseWriter })
		if !wraps {
			return bw
		}
		if x = u.Unwrap(); x == nil {
			return nil
		}
		if _, ok := x.(BlockWriter); !ok {
			return nil
		}
	}
}

// putBlock gives the head block back to the pool.
func (d *directReq) putBlock() {
	if d.blk != nil {
		if cap(d.blk.Fields) > 4<<10 {
			d.blk.Fields = nil // not a large head's space for every request
		}
		d.p.blocks.Put(d.blk)
		d.blk = nil
	}
}

// roundTrip sends the request and reads the response's head; a failed
// send goes to the one retry decision (retry.go), and is sent once more,
// as it is, when that gives a fresh upstream the direct path can reach.
func (d *directReq) roundTrip() (*http.Response, error) {
	route, r := d.route, d.r
	fwd := d.p.fwdApps
	if route.HomeID != "" {
		fwd = d.p.fwdHomes
	}
	res, err := d.send(fwd, route.Upstream)
	if err == nil {
		return res, nil
	}
	u, err := d.p.retryUpstream(route, r, err) // retry.go
	if u == nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("retry toward %s: not a plain http upstream", u.Redacted())
	}
	if h := route.out.host; strings.IndexByte(h, '%') >= 0 || !httpguts.ValidHostHeader(h) {
		return nil, fmt.Errorf("retry toward %s: Host %q cannot go as it is", u.Redacted(), h)
	}
	res, err = d.send(fwd, u)
	if err != nil {
		route.failed(r)
	}
	return res, err
}

func (d *directReq) send(fwd *h1client.Forwarder, u *url.URL) (*http.Response, error) {
	res, err := fwd.Send(d.r.Context(), h1client.HostPort(u), d.r, d)
	if ns, ok := err.(h1client.NotSent); ok {
		err = ns.Unwrap()
	}
	return res, err
}

// Start writes the head of the outbound request, and flushes it when a
// body follows (the Transport does, so the upstream sees the head before
// a slow body).
func (d *directReq) Start(bw *bufio.Writer) error {
	r := d.r
	_, _ = bw.WriteString(r.Method)
	_ = bw.WriteByte(' ')
	u := url.URL{Path: d.path, RawPath: d.raw}
	if ep := u.EscapedPath(); ep != "" {
		_, _ = bw.WriteString(ep)
	} else {
		_ = bw.WriteByte('/')
	}
	if r.URL.ForceQuery || r.URL.RawQuery != "" {
		_ = bw.WriteByte('?')
		_, _ = bw.WriteString(r.URL.RawQuery)
	}
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.WriteString(d.route.out.host)
	_, _ = bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	if ua := r.Header["User-Agent"]; len(ua) > 0 && ua[0] != "" && !listed(conn, "User-Agent") {
		h1client.WriteField(bw, "User-Agent", textproto.TrimString(ua[0]))
	}
	switch {
	case d.length > 0:
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.WriteString(strconv.FormatInt(d.length, 10))
		_, _ = bw.WriteString("\r\n")
	case d.length < 0:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch:
		_, _ = bw.WriteString("Content-Length: 0\r\n") // many servers expect a length for these
	}
	plan := &d.route.out
	for k, vs := range r.Header {
		if skip(k) || !d.p.forwards(plan, k) || listed(conn, k) {
			continue
		}
		for _, v := range vs {
			h1client.WriteField(bw, k, textproto.TrimString(v))
		}
	}
	for f := range planFields { // the plan's own fields (headers.go)
		if plan.sets(f) {
			h1client.WriteField(bw, d.p.name(f), plan.vals[f])
		}
	}
	_, _ = bw.WriteString("\r\n")
	if d.length != 0 {
		return bw.Flush()
	}
	return nil
}

// skip reports whether the inbound field k is the byte writer's to leave
// out: written by start itself, or hop-by-hop, as ReverseProxy leaves it
// out (so are the fields the Connection values list). What the plan
// leaves out is the plan's (forwards).
func skip(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer",
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Upgrade":
		return true
	}
	return false
}

// listed reports whether the field named k (canonical) is among the
// tokens of the Connection values conn.
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for t := range strings.SplitSeq(v, ",") {
			if t = textproto.TrimString(t); t != "" && strings.EqualFold(t, k) {
				return true
			}
		}
	}
	return false
}

func (d *directReq) Closes() bool { return false }

func (d *directReq) Owner() *h1client.OwnedBody { return d.route.body }

func (d *directReq) Block() *h1client.HeadBlock { return d.blk }

// Write writes the body, when there is one, with its framing, and
// flushes.
func (d *directReq) Write(bw *bufio.Writer, body io.ReadCloser) error {
	switch {
	case body == nil:
	case d.length > 0:
		n, err := io.CopyN(bw, body, d.length)
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("http: ContentLength=%d with Body length %d", d.length, n)
			}
			return err
		}
	default:
		cw := httputil.NewChunkedWriter(bw)
		buf := d.p.bufs.Get()
		_, err := io.CopyBuffer(cw, struct{ io.Reader }{body}, buf)
		d.p.bufs.Put(buf)
		if err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		_, _ = bw.WriteString("\r\n")
	}
	return bw.Flush()
}

// Got1xx passes an informational response to the client, as ReverseProxy
// does: its fields go out with it and are cleared after.
func (d *directReq) Got1xx(code int, h http.Header) error {
	out := d.w.Header()
	copyHeader(out, h)
	d.w.WriteHeader(code)
	clear(out)
	return nil
}

// copyHeader adds src's fields to dst; a field dst does not have takes
// src's slice itself.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		if len(vv) == 0 {
			continue
		}
		if old, ok := dst[k]; ok {
			dst[k] = append(old, vv...)
		} else {
			dst[k] = vv
		}
	}
}

// answer writes res to the client: its head (hop-by-hop fields removed,
// adjustResponse's changes), its body, then its trailers.
func (d *directReq) answer(res *http.Response) {
	w := d.w
	h := w.Header()
	announced := len(res.Trailer)
	sse := false
	if res.Header == nil { // the fields are in d.blk (h1client.HeadBlock)
		sse = d.blk.EventStream
		if tok := d.route.RelayToken; tok != "" { // as adjustResponse does
			maskBlock(&d.blk.Block, tok)
			res.Body = &trailerMask{ReadCloser: newMaskReader(res.Body, tok), res: res, secret: tok}
		}
		d.writeBlock(res.StatusCode)
	} else {
		h1client.RemoveHopByHop(res.Header)
		d.p.adjustResponse(res, d.route)
		copyHeader(h, res.Header)
		if announced > 0 {
			keys := make([]string, 0, announced)
			for k := range res.Trailer {
				keys = append(keys, k)
			}
			h.Add("Trailer", strings.Join(keys, ", "))
		}
		sse = h1client.EventStream(res.Header.Get("Content-Type"))
		w.WriteHeader(res.StatusCode)
	}
	d.putBlock()
	if err := d.copyBody(w, res, sse); err != nil {
		_ = res.Body.Close()
		// The client must not take a cut body for a whole one.
		panic(http.ErrAbortHandler)
	}
	_ = res.Body.Close()
	if len(res.Trailer) > 0 {
		_ = http.NewResponseController(w).Flush() // force chunking
	}
	if len(res.Trailer) == announced {
		for k, vv := range res.Trailer {
			h[k] = append(h[k], vv...)
		}
		return
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			h.Add(k, v)
		}
	}
}

// writeBlock writes the head whose fields are in d.blk (masked already),
// with the wake's wait added as adjustResponse would; a writer that does not take the
// Block gets the fields in its header map.
func (d *directReq) writeBlock(code int) {
	b := d.blk
	if waited := d.route.Waited; waited > 0 {
		b.Fields = append(b.Fields, "Server-Timing: wake;dur="...)
		b.Fields = strconv.AppendInt(b.Fields, waited.Milliseconds(), 10)
		b.Fields = append(b.Fields, "\r\n"...)
	}
	if d.bw.WriteHeaderBlock(code, &b.Block) {
		d.p.blocked.Add(1)
		return
	}
	h := d.w.Header()
	for s := string(b.Fields); s != ""; {
		var line string
		line, s, _ = strings.Cut(s, "\r\n")
		k, v, _ := strings.Cut(line, ": ")
		h[k] = append(h[k], v)
	}
	d.w.WriteHeader(code)
}

// copyBody copies res's body to w with a pooled buffer, flushing after
// each write for an event stream (sse) or a body of unknown length.
func (d *directReq) copyBody(w http.ResponseWriter, res *http.Response, sse bool) error {
	flush := res.ContentLength == -1 || sse
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w)
		_ = rc.Flush()
	} else if ok, err := d.spliceBody(w, res); ok { // direct_splice.go
		return err
	}
	buf := d.p.bufs.Get()
	defer d.p.bufs.Put(buf)
	for {
		nr, rerr := res.Body.Read(buf)
		if rerr != nil && rerr != io.EOF && !errors.Is(rerr, context.Canceled) {
			d.p.opts.Log.Debug("read error during body copy", "route", d.route.Name, "err", rerr)
		}
		if nr > 0 {
			nw, werr := w.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nw != nr {
				return io.ErrShortWrite
			}
			if flush {
				_ = rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

var _ h1client.Sender = (*directReq)(nil)
