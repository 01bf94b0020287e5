package route

import (
	"io"
	"net/http"
	"time"
)

// ReadFrom passes a body to the wrapped writer's ReadFrom, which for a
// response of known length on a plain TCP connection lets the kernel move
// it (splice), counting the bytes and the status as Write does; without
// one it copies through Write.
func (r *Recorder) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := r.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{r}, src)
	}
	if r.status == 0 {
		r.status = http.StatusOK
		r.headerAt = time.Now()
	}
	n, err := rf.ReadFrom(src)
	r.bytes += n
	return n, err
}

var _ io.ReaderFrom = (*Recorder)(nil)
