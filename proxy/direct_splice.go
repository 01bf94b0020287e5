package proxy

import (
	"io"
	"net/http"

	"github.com/wakegate/wakegate/proxy/h1client"
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
	rf, isRF := w.(io.ReaderFrom)
	if !isRF {
		return false, nil
	}
	if ok, err = h1client.Splice(w, rf, res); !ok || err != nil {
		return ok, err
	}
	d.p.spliced.Add(1)
	return true, nil
}
