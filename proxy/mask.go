package proxy

import (
	"bytes"
	"io"
	"sync"
)

// maskReader replaces every occurrence of a secret in a response body with
// asterisks of the same length, so Content-Length stays right. It holds back
// only the tail of a read that could start an occurrence the next read
// completes (a suffix that is a prefix of the secret), so a streamed event
// is passed on at once unless it ends in the first bytes of the secret.
type maskReader struct {
	src    io.ReadCloser
	secret []byte
	buf    []byte // bytes read but not yet returned
	chunk  []byte // read buffer, allocated once
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
		if m.chunk == nil {
			m.chunk = make([]byte, 32<<10)
		}
		n, err := m.src.Read(m.chunk)
		m.buf = append(m.buf, m.chunk[:n]...)
		m.err = err
		m.mask()
		m.ready = len(m.buf) - heldBack(m.buf, m.secret)
	}
	n := copy(p, m.buf[:m.ready])
	m.buf = m.buf[n:]
	m.ready -= n
	if len(m.buf) == 0 {
		m.buf = nil
	}
	return n, nil
}

// heldBack returns the length of the longest suffix of b that is a proper
// prefix of secret: the only bytes that may start an occurrence the next
// read completes. Everything before them is final.
func heldBack(b, secret []byte) int {
	for n := min(len(b), len(secret)-1); n > 0; n-- {
		if bytes.Equal(b[len(b)-n:], secret[:n]) {
			return n
		}
	}
	return 0
}

func (m *maskReader) mask() {
	if len(m.secret) == 0 {
		return // nothing to hide; bytes.Index would match everywhere
	}
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

// bufferPool reuses the 32 KiB copy buffers of ReverseProxy and of the
// WebSocket relays.
type bufferPool struct{ p sync.Pool }

// The pool holds array pointers, so that ReverseProxy's Put of a slice
// allocates nothing.
func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([relayBufSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[relayBufSize]byte)[:] }

// Put takes back a buffer Get handed out; any other slice is left to the
// collector.
func (b *bufferPool) Put(s []byte) {
	if cap(s) >= relayBufSize {
		b.p.Put((*[relayBufSize]byte)(s[:relayBufSize]))
	}
}

// get and put serve the relays' pumps.
func (b *bufferPool) get() *[relayBufSize]byte  { return b.p.Get().(*[relayBufSize]byte) }
func (b *bufferPool) put(p *[relayBufSize]byte) { b.p.Put(p) }
