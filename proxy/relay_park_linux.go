package proxy

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A pump with nothing to read parks: its goroutine ends, and its source's
// descriptor waits in one epoll set that the proxy shares among all its
// relays. One goroutine waits on that set and starts a new goroutine for
// a pump whose source turns readable (or hangs up). An idle WebSocket so
// holds no goroutine and no stack at all, only its two connections and
// its relay's record; a busy one pays an epoll_ctl and a goroutine start
// per wake-up, which the netpoller's own park would spare.
//
// The descriptor is registered level-triggered and one-shot: a source
// that turned readable between the pump's last peek and its registration
// is reported at once, and after a report the entry stays disabled until
// the next park re-arms it. A relay that closes its connections first
// takes its parked pumps back (release), removing their descriptors from
// the set while they are still open, and runs them: each then finds its
// source closed and ends as it would have in a wait.

// canPark: pumps park in the proxy's epoll set here.
const canPark = true

// errParked ends a pump's goroutine whose pump is parked: the parker
// starts a new one when its source has something to read.
var errParked = errors.New("pump parked until its source is readable")

// parker is a proxy's epoll set of parked pumps and the goroutine that
// waits on it. Its zero value is ready to use: the set is made, and the
// goroutine started, at the first park.
type parker struct {
	mu      sync.Mutex
	started bool
	// stopped: no pump parks any more; closed: stop ran.
	stopped bool
	closed  bool
	epfd    int
	evfd    int      // written by stop to end the loop
	file    *os.File // epfd, waited on in the netpoller
	// slots holds the parked pumps, each at the slot its token names;
	// free lists the empty slots, gen numbers the parks. A slot costs
	// less than a map entry, and an idle relay keeps two for hours.
	slots  []parkedPump
	free   []uint32
	gen    uint32
	parked int    // pumps in slots
	parks  uint64 // parks so far, for benchmarks
	done   chan struct{}
	// failed is why the set could not be made; pumps then wait the
	// netpoller's way.
	failed error
}

// parkedPump is one pump waiting in the set (pu nil: the slot is free).
type parkedPump struct {
	rel *relay
	pu  *pump
	tok uint64
}

// A park's token, its entry's data in the set, is its slot (low 32 bits)
// and its generation (high 32 bits, never 0): an event that comes for a
// slot taken back since, and given to another park, is not mistaken for
// the new one's.

// put records pu in a free slot and returns its token. Called with mu
// held.
func (k *parker) put(rel *relay, pu *pump) uint64 {
	var slot uint32
	if n := len(k.free); n > 0 {
		slot = k.free[n-1]
		k.free = k.free[:n-1]
	} else {
		slot = uint32(len(k.slots))
		k.slots = append(k.slots, parkedPump{})
	}
	if k.gen++; k.gen == 0 {
		k.gen = 1
	}
	tok := uint64(k.gen)<<32 | uint64(slot)
	k.slots[slot] = parkedPump{rel: rel, pu: pu, tok: tok}
	k.parked++
	return tok
}

// take empties the slot of tok and returns what it held, if it still
// holds that park. Called with mu held.
func (k *parker) take(tok uint64) (parkedPump, bool) {
	slot := uint32(tok)
	if tok>>32 == 0 || int(slot) >= len(k.slots) || k.slots[slot].tok != tok {
		return parkedPump{}, false
	}
	pp := k.slots[slot]
	k.slots[slot] = parkedPump{}
	k.free = append(k.free, slot)
	k.parked--
	pp.pu.token = 0
	return pp, true
}

// parkResult is what park did.
type parkResult int

const (
	parked   parkResult = iota // pu waits in the set
	readable                   // src has something to read now
	refused                    // pu waits on its own goroutine
)

// stopToken is the event data of the stop eventfd; no pump's token is 0.
const stopToken = 0

// park registers pu's source in the set unless it is readable now or the
// relay is closing. It reports parked (the goroutine must end with
// errParked and not touch pu again), readable (read now), or refused
// (wait for readability on this goroutine).
func (k *parker) park(rel *relay, pu *pump) (parkResult, error) {
	if ok, err := peekReadable(pu.raw); ok || err != nil {
		return readable, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if rel.releasing || k.stopped || k.start() != nil {
		return refused, nil
	}
	// The slot is taken before the descriptor enters the set: an event
	// may come as soon as it does.
	tok := k.put(rel, pu)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(uint32(tok)), Pad: int32(uint32(tok >> 32))}
	var cerr error
	err := pu.raw.Control(func(fd uintptr) {
		op := unix.EPOLL_CTL_MOD
		if !pu.inSet {
			op = unix.EPOLL_CTL_ADD
		}
		cerr = unix.EpollCtl(k.epfd, op, int(fd), &ev)
		if cerr == nil {
			pu.inSet = true
		}
	})
	if err != nil || cerr != nil {
		k.take(tok)
	}
	if err != nil {
		return readable, nil // the connection is closed: the read says so
	}
	if cerr != nil {
		return refused, nil // wait the netpoller's way
	}
	pu.token = tok
	pu.parkedAt = nowMilli()
	k.parks++
	return parked, nil
}

// parksSoFar is how many times a pump has parked.
func (k *parker) parksSoFar() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.parks
}

// release takes rel's parked pumps back before its connections close:
// their descriptors leave the set and each pump runs again. No pump of
// rel parks after it.
func (k *parker) release(rel *relay) {
	k.mu.Lock()
	rel.releasing = true
	var back []*pump
	for i := range rel.pumps {
		pu := &rel.pumps[i]
		if pu.token == 0 {
			continue
		}
		k.take(pu.token)
		_ = pu.raw.Control(func(fd uintptr) { _ = unix.EpollCtl(k.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
		pu.inSet = false
		back = append(back, pu)
	}
	k.mu.Unlock()
	for _, pu := range back {
		go rel.run(pu)
	}
}

// start makes the set and starts the loop, once. Called with mu held.
func (k *parker) start() error {
	if k.started {
		return k.failed
	}
	k.started = true
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		k.failed = fmt.Errorf("epoll_create1: %w", err)
		return k.failed
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		k.failed = fmt.Errorf("eventfd: %w", err)
		return k.failed
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: stopToken}); err != nil {
		_ = unix.Close(evfd)
		_ = unix.Close(epfd)
		k.failed = fmt.Errorf("epoll_ctl eventfd: %w", err)
		return k.failed
	}
	// The set itself waits in Go's netpoller (an epoll descriptor is
	// readable while it holds events): the loop is a goroutine parked
	// like any other, not a thread blocked in epoll_wait, so a wake-up
	// costs what a socket's does.
	if err := unix.SetNonblock(epfd, true); err != nil {
		_ = unix.Close(evfd)
		_ = unix.Close(epfd)
		k.failed = fmt.Errorf("epoll set non-blocking: %w", err)
		return k.failed
	}
	f := os.NewFile(uintptr(epfd), "relay-parker")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		_ = unix.Close(evfd)
		k.failed = fmt.Errorf("epoll descriptor: %w", err)
		return k.failed
	}
	k.epfd, k.evfd, k.file = epfd, evfd, f
	k.done = make(chan struct{})
	go k.loop(rc)
	return nil
}

// loop waits on the set and runs each pump whose source is ready, until
// stop.
func (k *parker) loop(rc syscall.RawConn) {
	defer close(k.done)
	events := make([]unix.EpollEvent, 256)
	stop := false
	// An error (the set failed) ends the loop like a stop: the pumps go
	// back to waiting on goroutines of their own.
	_ = rc.Read(func(fd uintptr) bool {
		// Take every event the set holds, then wait for the next: the
		// netpoller reports the set's readiness edge-triggered.
		for !stop {
			n, err := unix.EpollWait(int(fd), events, 0)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				return err != nil
			}
			stop = k.dispatch(events[:n])
		}
		return true
	})
	k.unparkAll() // after stop, or a failed set: pumps wait the netpoller's way
}

// dispatch runs the pumps whose events came, and reports whether stop
// asked the loop to end.
func (k *parker) dispatch(events []unix.EpollEvent) (stop bool) {
	for _, ev := range events {
		tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
		if tok == stopToken {
			stop = true
			continue
		}
		k.mu.Lock()
		pp, ok := k.take(tok)
		if ok {
			pp.pu.woken(nowMilli())
		}
		k.mu.Unlock()
		if ok {
			go pp.rel.run(pp.pu)
		}
	}
	return stop
}

// unparkAll runs every parked pump and refuses parks from now on.
func (k *parker) unparkAll() {
	k.mu.Lock()
	k.stopped = true
	var all []parkedPump
	for _, pp := range k.slots {
		if pp.pu != nil {
			pp.pu.token = 0
			all = append(all, pp)
		}
	}
	k.slots, k.free, k.parked = nil, nil, 0
	k.mu.Unlock()
	for _, pp := range all {
		go pp.rel.run(pp.pu)
	}
}

// stop ends the loop, runs the pumps still parked (they wait the
// netpoller's way from now on) and closes the set.
func (k *parker) stop() {
	k.mu.Lock()
	running := k.done != nil && !k.closed
	k.started = true // no start after stop
	k.stopped = true
	k.closed = true
	k.mu.Unlock()
	if !running {
		return // never started, or stopped already
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	_, _ = unix.Write(k.evfd, one)
	<-k.done
	// Relays still open keep their descriptors in the set until they
	// close; closing the set drops those entries with it.
	_ = unix.Close(k.evfd)
	_ = k.file.Close()
}

// peekReadable reports whether rc has something to read now (data, an
// EOF or an error), without waiting and leaving the data in the socket.
func peekReadable(rc syscall.RawConn) (bool, error) {
	readable := false
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		readable = err != unix.EAGAIN
		return true
	})
	return readable, err
}
