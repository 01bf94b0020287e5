// Package sockio reads and writes a TCP connection's socket with system
// calls the Go scheduler is not told about, waiting in the netpoller
// exactly as net.Conn does.
//
// A net.Conn read or write tells the scheduler it is entering a system
// call. When one lasts longer than the runtime's monitor thread takes to
// look (a loopback write runs the receiver's TCP input in the writer's
// call), the monitor hands the processor to another thread and wakes it;
// the caller then has to win a processor back when the call returns. On
// a gateway pinned to few CPUs that costs two thread switches for a call
// that never sleeps: a non-blocking socket's read or write copies what it
// can and returns, or returns EAGAIN, and the wait is the netpoller's.
// Conn makes the same calls without the hand-off, through
// syscall.RawConn, so deadlines, Close and the netpoller work as before.
package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Conn does the reads and writes of one *net.TCPConn. A Read and a Write
// may run at once, as on net.Conn; two Reads (or two Writes) may not.
type Conn struct {
	tcp *net.TCPConn
	raw syscall.RawConn

	rp   []byte
	rn   int
	rerr syscall.Errno
	rfn  func(fd uintptr) bool

	wp   []byte
	wn   int
	werr syscall.Errno
	wfn  func(fd uintptr) bool
	tfn  func(fd uintptr) bool

	idle bool
	pfn  func(fd uintptr) bool

	// WriteAwait's state: afn is its read callback, asent whether that
	// callback has run its write, aerr that raw write's own error (a
	// write deadline passed, a close).
	afn   func(fd uintptr) bool
	asent bool
	aerr  error
}

// New returns a Conn over c, or nil where this platform has no such
// calls or c gives no raw access; callers then use c itself.
func New(c *net.TCPConn) *Conn {
	if !supported || c == nil {
		return nil
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	s := &Conn{tcp: c, raw: raw}
	s.rfn = s.readFD
	s.wfn = s.writeFD
	s.tfn = s.tryWriteFD
	s.pfn = s.peekFD
	s.afn = s.awaitFD
	return s
}

// Beneath returns the TCP connection beneath c when every layer between
// them reads and writes through unchanged (it says so with a method
// ReadsWritesThrough() net.Conn), else nil: the connection whose socket a
// Conn may then read and write for c.
func Beneath(c net.Conn) *net.TCPConn {
	for range 8 {
		if t, ok := c.(*net.TCPConn); ok {
			return t
		}
		x, ok := c.(interface{ ReadsWritesThrough() net.Conn })
		if !ok {
			return nil
		}
		c = x.ReadsWritesThrough()
	}
	return nil
}

// Read reads into p as net.Conn's Read does: it waits (within the read
// deadline) until something can be read, and reports the peer's close
// as io.EOF.
func (s *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rp, s.rn, s.rerr = p, 0, 0
	err := s.raw.Read(s.rfn)
	s.rp = nil
	n, err := s.result("read", s.rn, err, s.rerr)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (s *Conn) readFD(fd uintptr) bool {
	for {
		n, errno := sysRead(fd, s.rp)
		switch errno {
		case 0:
			s.rn = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		s.rerr = errno
		return true
	}
}

// Write writes all of p as net.Conn's Write does, waiting (within the
// write deadline) while the socket's buffer is full. On an error it
// reports how much was written before it.
func (s *Conn) Write(p []byte) (int, error) { return s.write(p, s.wfn) }

// TryWrite writes what of p the socket takes now, without waiting: n <
// len(p) with a nil error means its buffer is full. A write deadline
// that has passed fails it as it fails Write.
func (s *Conn) TryWrite(p []byte) (int, error) { return s.write(p, s.tfn) }

// write writes p with fn, writeFD (wait while the buffer is full) or
// tryWriteFD (do not).
func (s *Conn) write(p []byte, fn func(fd uintptr) bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wp, s.wn, s.werr = p, 0, 0
	err := s.raw.Write(fn)
	s.wp = nil
	return s.result("write", s.wn, err, s.werr)
}

// WriteAwait writes p as Write does and, when the socket takes all of it
// at once, then waits (within the read deadline) until the connection
// has something to read, and reads nothing: for a request whose answer
// follows, the next Read then finds it at its first call, where a read
// right after the write most often finds nothing yet and costs a system
// call of its own. The wait is entered before the write, so an answer
// that comes at once is not missed. Whatever ends the wait (a deadline,
// a close) is the next Read's to report: waited says whether the wait
// ran (false when the write had to wait for room, or failed), and n and
// err are the write's, as Write reports them.
func (s *Conn) WriteAwait(p []byte) (n int, waited bool, err error) {
	if len(p) == 0 {
		return 0, false, nil
	}
	s.wp, s.wn, s.werr, s.asent, s.aerr = p, 0, 0, false, nil
	_ = s.raw.Read(s.afn)
	sent, aerr, errno := s.asent, s.aerr, s.werr
	n = s.wn
	s.wp, s.aerr = nil, nil
	switch {
	case !sent:
		// The read's wait could not begin (a close, a read deadline
		// passed): a plain write says what the write makes of it.
		n, err = s.Write(p)
		return n, false, err
	case aerr != nil || errno != 0:
		n, err = s.result("write", n, aerr, errno)
		return n, false, err
	case n < len(p):
		// The buffer filled: the rest waits as Write waits.
		m, err := s.Write(p[n:])
		return n + m, false, err
	}
	return n, true, nil
}

// awaitFD is WriteAwait's read callback: at its first call it writes,
// through the raw write so that the write deadline and a close apply as
// they do to Write, and asks for the wait unless the write is not whole;
// at the next (the connection is readable, or the wait ended) it is done.
func (s *Conn) awaitFD(uintptr) bool {
	if s.asent {
		return true
	}
	s.asent = true
	s.aerr = s.raw.Write(s.tfn)
	return s.aerr != nil || s.werr != 0 || s.wn < len(s.wp)
}

func (s *Conn) tryWriteFD(fd uintptr) bool {
	s.writeFD(fd)
	return true
}

func (s *Conn) writeFD(fd uintptr) bool {
	for s.wn < len(s.wp) {
		n, errno := sysWrite(fd, s.wp[s.wn:])
		switch errno {
		case 0:
			s.wn += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			s.werr = errno
			return true
		}
	}
	return true
}

// result turns what a call did into net.Conn's results: n, and the
// wait's error (a deadline, a close) or the call's own errno.
func (s *Conn) result(op string, n int, err error, errno syscall.Errno) (int, error) {
	switch {
	case err != nil:
		return n, s.opError(op, err)
	case errno != 0:
		return n, s.opError(op, os.NewSyscallError(op, errno))
	}
	return n, nil
}

// opError gives err the shape net.Conn's errors have, so that callers
// matching net.Error, os.ErrDeadlineExceeded, net.ErrClosed or an errno
// see what they would see from the connection itself.
func (s *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err // RawConn's own "raw-read": keep only its cause
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.tcp.LocalAddr(), Addr: s.tcp.RemoteAddr(), Err: err}
}

// Idle reports whether the connection is open with nothing to read: a
// one-byte peek that does not wait finds nothing (EAGAIN). The peer's
// close, an error and a byte nobody asked for all make it false: such a
// connection must not carry a request.
func (s *Conn) Idle() bool {
	s.idle = false
	err := s.raw.Read(s.pfn)
	return err == nil && s.idle
}

func (s *Conn) peekFD(fd uintptr) bool {
	errno := sysPeek(fd)
	for errno == syscall.EINTR {
		errno = sysPeek(fd)
	}
	s.idle = errno == syscall.EAGAIN
	return true
}
