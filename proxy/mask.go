package proxy

import (
	"bytes"
	"io"
	"sync"
)

// maskReader replaces every occurrence of a secret in a response body with
// asterisks of the same length, so Content-Length stays right. It holds back
// the last len(secret)-1 bytes of each read until it knows they do not start
// an occurrence that the next read completes.
type maskReader struct {
	src    io.ReadCloser
	secret []byte
	buf    []byte // bytes read but not yet returned
	ready  int    // how many bytes at the front of buf are masked and final
	err    error
}

func newMaskReader(src io.ReadCloser, secret string) *maskReader {
	return &maskReader{src: src, secret: []byte(secret)}
}

func (m *maskReader) Read(p []byte) (int, error) {
	for m.ready == 0 {
		if m.err != nil {
			if len(m.buf) == 0 {
				return 0, m.err
			}
			m.ready = len(m.buf) // at EOF every held byte is final
			break
		}
		var chunk [32 << 10]byte
		n, err := m.src.Read(chunk[:])
		m.buf = append(m.buf, chunk[:n]...)
		m.err = err
		m.mask()
		if keep := len(m.secret) - 1; len(m.buf) > keep {
			m.ready = len(m.buf) - keep
		}
	}
	n := copy(p, m.buf[:m.ready])
	m.buf = m.buf[n:]
	m.ready -= n
	if len(m.buf) == 0 {
		m.buf = nil
	}
	return n, nil
}

func (m *maskReader) mask() {
	for i := 0; ; {
		j := bytes.Index(m.buf[i:], m.secret)
		if j < 0 {
			return
		}
		for k := range m.secret {
			m.buf[i+j+k] = '*'
		}
		i += j + len(m.secret)
	}
}

func (m *maskReader) Close() error { return m.src.Close() }

// bufferPool reuses the 32 KiB copy buffers of ReverseProxy.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufferPool) Put(s []byte) { b.p.Put(&s) }
