package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// Request buffering: a request that takes one of its home's forwarding
// slots (forward.Route.Acquire) has its body read ahead first, into memory up to
// Options.BodyBuffer and on into an unlinked temporary file up to
// Options.BodySpool more, the way nginx buffers request bodies. A client
// that sends slowly then holds only its own connection while its body
// arrives, under the minimum body rate; the slot is taken once the body is
// whole, and the upstream gets it at loopback speed. A body longer than
// both bounds (or when nothing may go to disk) is forwarded as it comes
// once the buffered part is sent, holding its slot while the rest arrives.

// spooled is a request body read ahead of its forward: what was buffered,
// then (when the body was longer than the bounds) the rest of the caller's
// body. It owns the temporary file and the caller's body, and closes both.
type spooled struct {
	io.Reader
	file *os.File  // the part past memory; nil when none
	rest io.Closer // the caller's body when it was not read to its end
	size int64     // bytes buffered
	done bool      // the whole body was buffered
	// disk is why nothing went to disk past memory (the temporary file
	// could not be made), for the log; the rest then streams.
	disk error
	// budget, client and held are the body budget's reservation
	// (budget.go), given back at Close.
	budget *bodyBudget
	client string
	held   int64
	// grow reserves n more bytes of spool; nil when the whole body was
	// reserved at once.
	grow func(n int64) bool
}

func (s *spooled) Close() error {
	s.budget.give(s.client, s.held)
	s.held = 0
	if s.file != nil {
		_ = s.file.Close()
	}
	if s.rest != nil {
		return s.rest.Close()
	}
	return nil
}

// spool reads r's body ahead as the package comment says and puts the
// buffer in its place. It returns nil with nothing done when buffering is
// off. An error is a failure to read the caller's body (too slow, too
// long, malformed, the caller gone), to be answered as the caller's.
func (p *Proxy) spool(r *http.Request) (*spooled, error) {
	limit := p.opts.BodyBuffer
	if limit <= 0 || !h1client.HasBody(r) {
		return nil, nil
	}
	body := r.Body
	n := limit
	if r.ContentLength >= 0 {
		n = min(n, r.ContentLength)
	}
	s, err := p.reserve(r, n)
	if err != nil {
		return nil, err
	}
	// Not pooled: the forward may hand the buffer to a reader that
	// outlives it.
	mem := make([]byte, n)
	k, eof, err := readUpTo(body, mem)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.size = int64(k)
	parts := []io.Reader{bytes.NewReader(mem[:k])}
	whole := eof || s.size == r.ContentLength
	if !whole && p.opts.BodySpool > 0 {
		f, size, ended, err := p.spoolFile(body, s.grow)
		switch {
		case f != nil:
			s.file = f
			s.size += size
			whole = ended || s.size == r.ContentLength
			parts = append(parts, f)
		case errors.Is(err, errSpoolCreate):
			s.disk = err
		default:
			_ = s.Close()
			return nil, err
		}
	}
	if whole {
		// Closing the caller's body now lifts the body rate's read
		// deadline (proxy/minrate) before the forward, which may take long.
		_ = body.Close()
		s.done = true
		r.ContentLength = s.size
		r.TransferEncoding = nil
		r.Header.Del("Expect") // the body is here: nothing to wait for
	} else {
		parts = append(parts, body)
		s.rest = body
	}
	s.Reader = io.MultiReader(parts...)
	r.Body = s
	return s, nil
}

// errSpoolCreate marks a temporary file that could not be made: nothing
// of the body was read into it, so the body is forwarded as it comes.
var errSpoolCreate = errors.New("creating the request body's temporary file")

// reserve takes the body budget's reservation of r's read-ahead (see
// budget.go), mem bytes of memory to begin with, and returns the spooled
// body that holds it; the error is the refusal to answer.
func (p *Proxy) reserve(r *http.Request, mem int64) (*spooled, error) {
	s := &spooled{budget: p.budget}
	if p.budget == nil {
		return s, nil
	}
	s.client = p.clientIP(r)
	want := mem
	if r.ContentLength >= 0 {
		want = min(r.ContentLength, p.opts.BodyBuffer+p.opts.BodySpool)
	} else {
		s.grow = func(n int64) bool {
			if !p.budget.take(s.client, n) {
				return false
			}
			s.held += n
			return true
		}
	}
	if p.budget.never(want) {
		p.budget.refused.Add(1)
		return nil, &budgetRefused{overBudget(true)}
	}
	if !p.budget.take(s.client, want) {
		p.budget.refused.Add(1)
		return nil, &budgetRefused{overBudget(false)}
	}
	s.held = want
	return s, nil
}

// spoolFile copies up to BodySpool more bytes of body into an unlinked
// temporary file, rewound, and returns it with the bytes it holds and
// whether body ended there. grow, when set, reserves each piece of the
// file from the body budget first; one it refuses ends the copy, and the
// rest of the body streams.
func (p *Proxy) spoolFile(body io.Reader, grow func(int64) bool) (*os.File, int64, bool, error) {
	f, err := os.CreateTemp(p.opts.SpoolDir, "wakegate-body-*")
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: %w", errSpoolCreate, err)
	}
	// Unlinked at once: the file goes with its descriptor, even when the
	// process dies.
	_ = os.Remove(f.Name())
	buf := p.bufs.Get()
	var n int64
	ended := false
	for n < p.opts.BodySpool {
		piece := p.opts.BodySpool - n
		if grow != nil {
			piece = min(piece, spoolPiece)
			if !grow(piece) {
				break
			}
		}
		var k int64
		k, err = io.CopyBuffer(onlyWriter{f}, io.LimitReader(readerOnly{body}, piece), buf)
		n += k
		if err != nil || k < piece {
			ended = err == nil
			break
		}
	}
	p.bufs.Put(buf)
	if err == nil {
		if _, serr := f.Seek(0, io.SeekStart); serr != nil {
			err = spoolFailed(serr)
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, false, err
	}
	return f, n, ended, nil
}

// readUpTo reads r into buf until buf is full or r ends (eof).
func readUpTo(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// spoolFailed is the answer when the temporary file failed half way
// (a full disk): part of the body is gone, so the request cannot go on.
func spoolFailed(err error) error {
	return fault.Wrap(fault.Internal, "body_spool_failed", "The request body could not be stored for forwarding.",
		fmt.Errorf("writing a request body to its temporary file: %w", err)).
		WithHint("the spool directory (proxy.body_spool_dir, else the system's temporary directory) is full or " +
			"not writable: free space there, or lower proxy.body_spool")
}

// onlyWriter hides a file's ReadFrom from io.Copy (the source is the
// caller's body, nothing the kernel could copy from), and tells a write
// error from a read error of the body.
type onlyWriter struct{ f *os.File }

func (w onlyWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = spoolFailed(err)
	}
	return n, err
}

// readerOnly hides a body's WriteTo from io.Copy.
type readerOnly struct{ io.Reader }
