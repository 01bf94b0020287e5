package proxy

import (
	"io"
	"net"
	"net/http"
)

// spliceMin is the least known length of a response body that the direct
// path hands to the writers' ReadFrom: net/http's response writer passes a
// plain TCP source to the kernel (splice on Linux), so the body goes from
// the upstream's connection to the client's without a copy through user
// memory. Below it the copy is cheaper than the extra system calls.
const spliceMin = 64 << 10

// spliceBody sends res's body from the upstream's connection through
// w's ReadFrom when it can: a length of at least spliceMin, no relay
// token to mask, no trailers, a plain HTTP/1 client, a forwarder's body
// on a TCP or Unix connection and a writer chain with ReadFrom. ok false: nothing was done, copy the body.
// Otherwise err is the failure of the copy; on success the connection is
// back in the pool, having given exactly the body's length.
func (d *directReq) spliceBody(w http.ResponseWriter, res *http.Response) (ok bool, err error) {
	if res.ContentLength < spliceMin || d.route.RelayToken != "" || len(res.Trailer) > 0 ||
		d.r.TLS != nil || d.r.ProtoMajor != 1 {
		// Only a plain HTTP/1 client connection can take a splice; the
		// others copy with the pooled buffers.
		return false, nil
	}
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
	rf, isRF := w.(io.ReaderFrom)
	if src == nil || !isRF {
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
	d.p.spliced.Add(1)
	b.eof = true
	b.finish(true)
	return true, nil
}
