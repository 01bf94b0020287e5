//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// bufSize bounds a request head with its body.
const bufSize = 16 << 10

// upBufSize is the size of each read of an answer: a 256 KiB answer then
// takes a few reads and writes, as nginx's proxy buffers (16 of 16 KiB)
// let it.
const upBufSize = 128 << 10

// events is what every socket is registered for: edge-triggered reads,
// writes and the peer's close. EPOLLET is bit 31, which package syscall
// spells as a negative int.
const events = uint32(syscall.EPOLLIN|syscall.EPOLLOUT|syscall.EPOLLRDHUP) | 1<<31

const (
	kindListener = iota
	kindClient
	kindUpstream
	kindWake
)

// sock is one descriptor in the loop: the listener, a client, an upstream
// connection to the backend, or the eventfd that stops the loop.
type sock struct {
	fd     int
	kind   int
	closed bool

	// A client's state.
	in    []byte // bytes read and not yet forwarded
	out   []byte // answer bytes the client has not taken yet
	up    *sock  // the upstream carrying its current request
	xff   []byte // the client's address for X-Forwarded-For
	inEOF bool   // the client has closed its side
	last  bool   // the request in flight asked for Connection: close

	// An upstream's state.
	client    *sock  // the client whose answer it carries, nil when idle
	buf       []byte // the outbound head, then each read of the answer
	left      int    // answer bytes still to come once the head is read; -1 before
	connected bool   // the non-blocking connect has completed
}

// loop is the forwarder: one epoll set, the sockets in it by descriptor,
// and the idle upstream connections.
type loop struct {
	ep      int
	ln      *sock
	wake    *sock
	addr    string
	backend syscall.SockaddrInet4
	prefix  []byte
	socks   map[int]*sock
	idle    []*sock
	ready   []syscall.EpollEvent
	free    []*sock // clients dropped, kept with their buffers for the next accept
	// outPeak is the most answer bytes any client has held back at once.
	outPeak int
}

// newLoop listens on listen and forwards requests under prefix to backend.
func newLoop(listen, backend, prefix string) (*loop, error) {
	la, err := inet4(listen)
	if err != nil {
		return nil, fmt.Errorf("-listen: %w", err)
	}
	ba, err := inet4(backend)
	if err != nil {
		return nil, fmt.Errorf("-backend: %w", err)
	}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	l := &loop{ep: ep, backend: *ba, prefix: []byte(prefix), socks: map[int]*sock{}, ready: make([]syscall.EpollEvent, 512)}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		l.shut()
		return nil, fmt.Errorf("socket: %w", err)
	}
	l.ln = &sock{fd: fd, kind: kindListener}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		closeFD(fd)
		l.shut()
		return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := syscall.Bind(fd, la); err != nil {
		closeFD(fd)
		l.shut()
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	if err := syscall.Listen(fd, 4096); err != nil {
		closeFD(fd)
		l.shut()
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		closeFD(fd)
		l.shut()
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	s4 := sa.(*syscall.SockaddrInet4)
	l.addr = net.JoinHostPort(net.IP(s4.Addr[:]).String(), strconv.Itoa(s4.Port))
	if err := l.add(l.ln, syscall.EPOLLIN); err != nil {
		closeFD(fd)
		l.shut()
		return nil, err
	}
	efd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		l.shut()
		return nil, fmt.Errorf("eventfd2: %w", errno)
	}
	l.wake = &sock{fd: int(efd), kind: kindWake}
	if err := l.add(l.wake, syscall.EPOLLIN); err != nil {
		closeFD(int(efd))
		l.shut()
		return nil, err
	}
	return l, nil
}

// inet4 resolves an IPv4 host:port.
func inet4(hostport string) (*syscall.SockaddrInet4, error) {
	ta, err := net.ResolveTCPAddr("tcp4", hostport)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	return sa, nil
}

// Addr is the address the loop listens on.
func (l *loop) Addr() string { return l.addr }

// Run serves until ctx ends, then closes every socket. It holds its OS
// thread for the whole time.
func (l *loop) Run(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.shut()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			one := uint64(1)
			_, _, _ = syscall.Syscall(syscall.SYS_WRITE, uintptr(l.wake.fd), uintptr(unsafe.Pointer(&one)), 8)
		case <-done:
		}
	}()
	for {
		// A look that does not block first, out of the scheduler's sight;
		// only when nothing is ready does the thread block, as a system
		// call the runtime knows about.
		n, err := pollNow(l.ep, l.ready)
		if err == nil && n == 0 {
			n, err = syscall.EpollWait(l.ep, l.ready, -1)
		}
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range l.ready[:n] {
			s := l.socks[int(ev.Fd)]
			if s == nil || s.closed {
				continue
			}
			switch s.kind {
			case kindWake:
				return nil
			case kindListener:
				l.accept()
			case kindClient:
				if ev.Events&syscall.EPOLLOUT != 0 && len(s.out) > 0 {
					l.flush(s)
				}
				if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					l.readClient(s)
				}
			case kindUpstream:
				if !s.connected && ev.Events&(syscall.EPOLLOUT|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
					l.connected(s)
				}
				if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
					l.readUpstream(s)
				}
			}
		}
	}
}

// shut closes every socket and the epoll set.
func (l *loop) shut() {
	for _, s := range l.socks {
		if !s.closed {
			s.closed = true
			closeFD(s.fd)
		}
	}
	closeFD(l.ep)
}

func (l *loop) add(s *sock, ev uint32) error {
	e := syscall.EpollEvent{Events: ev, Fd: int32(s.fd)}
	if err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, s.fd, &e); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	l.socks[s.fd] = s
	return nil
}

// drop closes s and whatever depends on it: a client's upstream mid-answer
// (its answer can no longer be framed), an upstream's client.
func (l *loop) drop(s *sock) {
	if s.closed {
		return
	}
	s.closed = true
	delete(l.socks, s.fd)
	closeFD(s.fd)
	switch {
	case s.kind == kindClient && s.up != nil:
		up := s.up
		s.up, up.client = nil, nil
		l.drop(up)
	case s.kind == kindUpstream && s.client != nil:
		c := s.client
		s.client, c.up = nil, nil
		l.drop(c)
	}
	if s.kind == kindClient && len(l.free) < maxFree {
		l.free = append(l.free, s)
	}
}

func (l *loop) accept() {
	for {
		fd, sa, err := syscall.Accept4(l.ln.fd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN, or a full descriptor table: the next event retries
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		c := l.newClient(fd)
		if s4, ok := sa.(*syscall.SockaddrInet4); ok {
			c.xff, _ = net.IP(s4.Addr[:]).AppendText(c.xff[:0])
		}
		if l.add(c, events) != nil {
			closeFD(fd)
		}
	}
}

// maxFree bounds the dropped clients kept for reuse.
const maxFree = 1024

// newClient returns a client for fd, reusing a dropped one's buffers.
func (l *loop) newClient(fd int) *sock {
	k := len(l.free)
	if k == 0 {
		return &sock{fd: fd, kind: kindClient, in: make([]byte, 0, bufSize)}
	}
	c := l.free[k-1]
	l.free = l.free[:k-1]
	*c = sock{fd: fd, kind: kindClient, in: c.in[:0], out: c.out[:0], xff: c.xff[:0]}
	return c
}

// pollNow is epoll_wait with a timeout of zero.
func pollNow(ep int, ready []syscall.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(&ready[0])), uintptr(len(ready)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func sysRead(fd int, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(n), e
}

func sysWrite(fd int, p []byte) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), syscall.MSG_NOSIGNAL, 0, 0)
	return int(n), e
}

// readClient takes what the client sent. With edge-triggered events a read
// that returns less than it asked for has drained the socket, so no empty
// read follows it.
func (l *loop) readClient(c *sock) {
	for !c.inEOF && len(c.in) < cap(c.in) {
		n, e := sysRead(c.fd, c.in[len(c.in):cap(c.in)])
		if e == syscall.EAGAIN {
			break
		}
		if e != 0 {
			l.drop(c)
			return
		}
		if n == 0 {
			c.inEOF = true
			break
		}
		c.in = c.in[:len(c.in)+n]
		if len(c.in) < cap(c.in) {
			break
		}
	}
	l.next(c)
}

var (
	headEnd    = []byte("\r\n\r\n")
	httpVer    = []byte(" HTTP/1.1\r\n")
	fieldsTail = []byte("\r\nX-Forwarded-Proto: http\r\n\r\n")
	closeField = []byte("Connection: close\r\n")
)

// next forwards the client's next request if it has all of it and none is
// in flight. A client that has closed with nothing in flight is dropped.
func (l *loop) next(c *sock) {
	if c.closed || c.up != nil || len(c.out) > 0 {
		return
	}
	end := bytes.Index(c.in, headEnd)
	if end < 0 {
		if c.inEOF || len(c.in) == cap(c.in) {
			l.drop(c)
		}
		return
	}
	head := c.in[:end+2]
	nl := bytes.IndexByte(head, '\n')
	if nl < 1 {
		l.drop(c)
		return
	}
	line := head[:nl-1]
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 < 0 || sp2 <= sp1 || !bytes.HasPrefix(line[sp1+1:], l.prefix) {
		l.drop(c)
		return
	}
	up := l.upstream()
	if up == nil {
		l.drop(c)
		return
	}
	b := append(up.buf[:0], line[:sp2]...)
	b = append(b, httpVer...)
	body := 0
	for f := head[nl+1:]; len(f) > 0; {
		i := bytes.IndexByte(f, '\n')
		field := f[:i+1]
		f = f[i+1:]
		colon := bytes.IndexByte(field, ':')
		if colon <= 0 {
			l.park(up)
			l.drop(c)
			return
		}
		name := field[:colon]
		switch {
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(bytes.TrimSpace(field[colon+1:len(field)-2]), []byte("close")) {
				c.last = true
			}
			continue
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Upgrade")):
			l.park(up)
			l.drop(c)
			return
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, err := strconv.Atoi(string(bytes.TrimSpace(field[colon+1 : len(field)-2])))
			if err != nil || v < 0 {
				l.park(up)
				l.drop(c)
				return
			}
			body = v
		}
		b = append(b, field...)
	}
	b = append(b, "X-Forwarded-For: "...)
	b = append(b, c.xff...)
	b = append(b, fieldsTail...)
	start := end + 4
	if start+body > len(c.in) {
		l.park(up)
		if start+body > cap(c.in) {
			l.drop(c) // a body beyond the buffer
		}
		return // the rest of the body is on its way
	}
	b = append(b, c.in[start:start+body]...)
	c.in = c.in[:copy(c.in, c.in[start+body:])]
	up.buf = b
	c.up, up.client, up.left = up, c, -1
	l.send(up)
}

// upstream takes an idle connection to the backend or opens one.
func (l *loop) upstream() *sock {
	for k := len(l.idle); k > 0; k = len(l.idle) {
		up := l.idle[k-1]
		l.idle = l.idle[:k-1]
		if !up.closed {
			return up
		}
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	up := &sock{fd: fd, kind: kindUpstream, buf: make([]byte, 0, upBufSize)}
	switch err := syscall.Connect(fd, &l.backend); {
	case err == nil:
		up.connected = true
	case errors.Is(err, syscall.EINPROGRESS):
	default:
		closeFD(fd)
		return nil
	}
	if l.add(up, events) != nil {
		closeFD(fd)
		return nil
	}
	return up
}

// park puts an upstream that carries nothing back among the idle ones.
func (l *loop) park(up *sock) {
	up.client = nil
	l.idle = append(l.idle, up)
}

// connected finishes a non-blocking connect and sends what waited for it.
func (l *loop) connected(up *sock) {
	if v, err := syscall.GetsockoptInt(up.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || v != 0 {
		l.drop(up)
		return
	}
	up.connected = true
	if up.client != nil {
		l.send(up)
	}
}

// send writes the request in up.buf; a loopback backend's socket takes a
// head of this size whole.
func (l *loop) send(up *sock) {
	if !up.connected {
		return // connected sends it
	}
	n, e := sysWrite(up.fd, up.buf)
	if e != 0 || n != len(up.buf) {
		l.drop(up)
		return
	}
	up.buf = up.buf[:0]
}

// readUpstream relays the answer to the client. It stops reading while the
// client has bytes it has not taken (flush resumes it), so an answer of any
// size passes through upBufSize bytes of memory.
func (l *loop) readUpstream(up *sock) {
	for {
		c := up.client
		if c == nil {
			l.drop(up) // an idle upstream spoke, or closed: it cannot be reused
			return
		}
		if len(c.out) > 0 {
			return
		}
		n, e := sysRead(up.fd, up.buf[len(up.buf):cap(up.buf)])
		if e == syscall.EAGAIN {
			return
		}
		if e != 0 || n == 0 {
			l.drop(up)
			return
		}
		up.buf = up.buf[:len(up.buf)+n]
		out := up.buf
		if up.left < 0 {
			end := bytes.Index(up.buf, headEnd)
			if end < 0 {
				if len(up.buf) == cap(up.buf) {
					l.drop(up)
				}
				continue
			}
			size, ok := contentLength(up.buf[:end+2])
			if !ok {
				l.drop(up) // an answer this yardstick cannot frame
				return
			}
			up.left = end + 4 + size
			if c.last {
				// The client asked to close after this answer: say so,
				// or it would send its next request to a closed socket.
				out = append(append(append(make([]byte, 0, len(out)+len(closeField)), out[:end+2]...), closeField...), out[end+2:]...)
			}
		}
		if len(up.buf) > up.left {
			l.drop(up) // more than the answer: the backend cannot be trusted
			return
		}
		up.left -= len(up.buf)
		short := len(up.buf) < cap(up.buf)
		l.write(c, out)
		up.buf = up.buf[:0]
		if up.left == 0 {
			c.up = nil
			l.park(up)
			if len(c.out) == 0 {
				l.done(c)
			}
			return
		}
		if short {
			return // drained; the next edge brings the rest
		}
	}
}

// contentLength finds an answer head's Content-Length.
func contentLength(head []byte) (int, bool) {
	for f := head[bytes.IndexByte(head, '\n')+1:]; len(f) > 0; {
		i := bytes.IndexByte(f, '\n')
		field := f[:i+1]
		f = f[i+1:]
		colon := bytes.IndexByte(field, ':')
		if colon > 0 && bytes.EqualFold(field[:colon], []byte("Content-Length")) {
			v, err := strconv.Atoi(string(bytes.TrimSpace(field[colon+1 : len(field)-2])))
			return v, err == nil && v >= 0
		}
		if colon > 0 && bytes.EqualFold(field[:colon], []byte("Transfer-Encoding")) {
			return 0, false
		}
	}
	return 0, false
}

// write sends b to the client, keeping what it does not take for flush.
func (l *loop) write(c *sock, b []byte) {
	n, e := sysWrite(c.fd, b)
	switch {
	case e == syscall.EAGAIN:
		n = 0
	case e != 0:
		l.drop(c)
		return
	}
	if n < len(b) {
		c.out = append(c.out, b[n:]...)
		l.outPeak = max(l.outPeak, len(c.out))
	}
}

// flush writes what the client had not taken, then resumes the answer or
// the next request.
func (l *loop) flush(c *sock) {
	n, e := sysWrite(c.fd, c.out)
	if e == syscall.EAGAIN {
		return
	}
	if e != 0 {
		l.drop(c)
		return
	}
	c.out = c.out[:copy(c.out, c.out[n:])]
	if len(c.out) > 0 {
		return
	}
	if c.up != nil {
		l.readUpstream(c.up)
		return
	}
	l.done(c)
}

// done follows a client's answer that has left in full: the connection
// ends if the request asked for that, or carries the next request.
func (l *loop) done(c *sock) {
	if c.last {
		l.drop(c)
		return
	}
	l.next(c)
}

// closeFD closes a descriptor whose close can only fail on a descriptor
// that is already gone.
func closeFD(fd int) { _ = syscall.Close(fd) }
