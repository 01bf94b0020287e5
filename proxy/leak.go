package proxy

import (
	"bytes"
	"io"
	"net/http"

	"github.com/wakegate/wakegate/internal/h1head"
)

// The relay token is masked in a response's headers and body in
// modifyResponse; two more places carry what an upstream wrote and do not
// pass through it: informational responses (103 Early Hints, which
// ReverseProxy relays from a client trace) and trailers (filled in when the
// body ends). infoMaskWriter and trailerMask cover them.
//
// The bytes of an upgraded connection after its 101 are relayed unmasked:
// the relay copies them without parsing frames (relay_pump.go), and a
// compressed message could not be masked without inflating it. Masking is
// a net for an accidental echo of the home's own token, not the guard that
// keeps it secret; docs/security.md says so.

// infoMaskWriter masks secret in the headers of 1xx responses before they
// are written.
type infoMaskWriter struct {
	http.ResponseWriter
	secret string
}

// WriteHeader masks the headers of an informational response.
func (w *infoMaskWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		maskHeaders(w.Header(), w.secret)
	}
	w.ResponseWriter.WriteHeader(code)
}

// WriteHeaderBlock passes a head block, masked by the direct path
// already (maskBlock), to a writer that takes blocks.
func (w *infoMaskWriter) WriteHeaderBlock(code int, b *h1head.Block) bool {
	bw, ok := w.ResponseWriter.(BlockWriter)
	return ok && bw.WriteHeaderBlock(code, b)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *infoMaskWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maskBlock masks secret in the values of a head block's lines, as
// maskHeaders does in a map's.
func maskBlock(b *h1head.Block, secret string) {
	if secret == "" {
		return
	}
	f := b.Fields
	sec := []byte(secret)
	for len(f) > 0 {
		end := bytes.Index(f, crlf)
		if end < 0 {
			end = len(f)
		}
		line := f[:end]
		if colon := bytes.IndexByte(line, ':'); colon >= 0 {
			v := line[colon+1:]
			for i := bytes.Index(v, sec); i >= 0; i = bytes.Index(v, sec) {
				for j := range sec {
					v[i+j] = '*'
				}
				v = v[i+len(sec):]
			}
		}
		f = f[min(end+2, len(f)):]
	}
}

var crlf = []byte("\r\n")

// trailerMask masks secret in res's trailers when its body ends, before
// ReverseProxy copies them to the caller.
type trailerMask struct {
	io.ReadCloser
	res    *http.Response
	secret string
}

func (t *trailerMask) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil {
		maskHeaders(t.res.Trailer, t.secret)
	}
	return n, err
}
