package h1serve

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
)

// floorSplice moves a body of known length from a TCP source to the
// client in the kernel (splice through a pipe), as net.TCPConn.ReadFrom
// does, but keeps what a timed-out write leaves in the pipe, so that the
// floor can let the write go on (net's splice throws the pipe's bytes
// away on an error). handled false: nothing was done, copy instead.
func (c *conn) floorSplice(src io.Reader) (written int64, handled bool, err error) {
	lr, ok := src.(*io.LimitedReader)
	if !ok {
		return 0, false, nil
	}
	from, ok := lr.R.(*net.TCPConn)
	if !ok {
		return 0, false, nil
	}
	srcRC, err := from.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	if c.tcpRaw == nil {
		if c.tcpRaw, err = c.tcp.SyscallConn(); err != nil {
			return 0, false, nil
		}
	}
	dstRC := c.tcpRaw
	p, err := getPipe()
	if err != nil {
		return 0, false, nil
	}
	defer p.put()
	c.floorEnter()
	if !c.floorWait() {
		return 0, false, nil
	}
	for lr.N > 0 || p.data > 0 {
		if p.data == 0 {
			n, err := p.drain(srcRC, lr.N)
			if err != nil {
				if written == 0 && errors.Is(err, syscall.EINVAL) {
					return 0, false, nil // no splice from this source
				}
				return written, true, err
			}
			if n == 0 {
				return written, true, nil // the source ended early
			}
			lr.N -= int64(n)
		}
		n, err := p.pump(dstRC)
		written += int64(n)
		if err == nil {
			c.floorDone(int64(n))
			continue
		}
		if !c.floorRetry(int64(n), err) {
			return written, true, err
		}
	}
	return written, true, nil
}

const (
	spliceMove     = 0x1
	spliceNonblock = 0x2
	fSetPipeSize   = 1031 // F_SETPIPE_SZ
	pipeSize       = 1 << 20
	// spliceChunk is the most a drain takes at once: the client starts
	// on a chunk while the next comes in (a whole 256KiB body at once was
	// 20% slower on loopback).
	spliceChunk = 64 << 10
)

// splicePipe is a pipe with its state and the callbacks the raw
// connections run, made once per pipe so that a body costs no
// allocation.
type splicePipe struct {
	r, w    int
	data    int // bytes in the pipe
	cleanup runtime.Cleanup

	// the arguments and results of the callbacks
	limit           int64
	moved           int
	serr            error
	drainFn, pumpFn func(fd uintptr) bool
}

var pipePool sync.Pool

func getPipe() (*splicePipe, error) {
	if p, ok := pipePool.Get().(*splicePipe); ok {
		return p, nil
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, err
	}
	// A larger pipe moves more per call; without it the default serves.
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[1]), fSetPipeSize, pipeSize)
	p := &splicePipe{r: fds[0], w: fds[1]}
	p.drainFn, p.pumpFn = p.drainOnce, p.pumpOnce
	p.cleanup = runtime.AddCleanup(p, closePipe, fds)
	return p, nil
}

func closePipe(fds [2]int) {
	_ = syscall.Close(fds[0])
	_ = syscall.Close(fds[1])
}

// put keeps an empty pipe for another body and closes one that still
// holds bytes.
func (p *splicePipe) put() {
	if p.data != 0 {
		p.cleanup.Stop()
		closePipe([2]int{p.r, p.w})
		return
	}
	p.serr = nil
	pipePool.Put(p)
}

// again reports whether a splice's error means: wait and try again.
func again(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR)
}

// drain moves up to limit bytes the source has into the pipe, waiting
// (under the source's read deadline) until it has some. 0 and no error:
// the source ended.
func (p *splicePipe) drain(rc syscall.RawConn, limit int64) (int, error) {
	p.limit, p.moved, p.serr = min(limit, spliceChunk), 0, nil
	err := rc.Read(p.drainFn)
	if err == nil {
		err = p.serr
	}
	if err != nil {
		return 0, err
	}
	p.data += p.moved
	return p.moved, nil
}

func (p *splicePipe) drainOnce(fd uintptr) bool {
	n, err := syscall.Splice(int(fd), nil, p.w, nil, int(p.limit), spliceMove|spliceNonblock)
	p.serr = err
	if err == nil && n > 0 {
		p.moved = int(n)
	}
	return !again(err)
}

// pump moves what the pipe holds to the client, waiting (under the
// client's write deadline) for room.
func (p *splicePipe) pump(rc syscall.RawConn) (int, error) {
	p.moved, p.serr = 0, nil
	err := rc.Write(p.pumpFn)
	if err == nil {
		err = p.serr
	}
	return p.moved, err
}

func (p *splicePipe) pumpOnce(fd uintptr) bool {
	for p.data > 0 {
		n, err := syscall.Splice(p.r, nil, int(fd), nil, p.data, spliceMove|spliceNonblock)
		if err != nil {
			p.serr = err
			return !again(err)
		}
		if n <= 0 {
			p.serr = io.ErrUnexpectedEOF
			return true
		}
		p.data -= int(n)
		p.moved += int(n)
	}
	p.serr = nil
	return true
}
