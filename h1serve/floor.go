package h1serve

import (
	"errors"
	"net"
	"os"
	"time"
)

// A write floor is a minimum rate at which the client must take a
// response (SetWriteFloor). It is kept in time across the response, not
// per write: every byte the kernel takes for the client earns the
// response time at the floor's rate, and the client is cut once a write
// has waited past what was earned. Earnings are capped at the grace (and
// a little slack, see floorSlack) ahead of now, so that what a stalled
// client's socket buffers soak up at first (it can be a megabyte) buys it
// seconds, not hours: a client that stops reading is cut within about
// the grace, the slack and a tick of the kernel last taking a byte for
// it, one reading at a fraction f of the floor within about
// (grace+slack)/(1-f), and one at the floor or above is never cut,
// whatever the body's size.
//
// This needs a write that can go on after its deadline passed: a
// *net.TCPConn gives back what it wrote and stays usable, so the writer
// looks at what was taken, extends the deadline and goes on while the
// client keeps the floor. A TLS connection (or any other) is spoilt by a
// timed-out write, so the floor is refused there and the caller keeps
// deadlines that are final.

// floorSlack is added to the grace for the earnings' cap, at most
// floorSlackMax: TCP moves a slow reader's bytes in segments (a window
// opens by about one), so a reader at the floor shows no progress for a
// segment's time at the rate now and then, some seconds at a low floor.
const (
	floorSlackBytes = 2 << 10
	floorSlackMax   = 2 * time.Second
)

// floorProbe is how long a write that ran out of time is given to try
// once more: the runtime wakes a blocked write only when the kernel frees
// a good part of the socket's buffer, so a client that did take some
// bytes since may not have been seen; one more write sees them.
const floorProbe = 10 * time.Millisecond

// floorTick is the longest a write under the floor goes without its
// progress being counted (half the grace if that is shorter): what the
// kernel takes during a long write earns its time within a tick of being
// taken, not only when due comes, by which time the cap would let most
// of it earn nothing.
const floorTick = time.Second

type floor struct {
	on    bool
	rate  float64       // bytes per second
	ahead time.Duration // the cap on earnings: grace and slack
	grace time.Duration
	tick  time.Duration
	due   time.Time // the client is in good standing until then
	// armed: the floor's deadline is on the socket. It goes on when a
	// write first has to wait (floorWait), not when the floor starts: a
	// response the kernel takes at once never needs one.
	armed  bool
	probed bool // the last retry was a probe past due
	late   bool // the last write ended past due, in a probe
}

// plainTCP is the *net.TCPConn under c's PlainConn wrappers (whose reads
// and writes pass through), or nil.
func plainTCP(c net.Conn) *net.TCPConn {
	return beneath(c, func(c net.Conn) net.Conn {
		if x, ok := c.(interface{ PlainConn() net.Conn }); ok {
			return x.PlainConn()
		}
		return nil
	})
}

// beneath follows next down from c to a TCP connection, at most a few
// layers; nil when next stops first.
func beneath(c net.Conn, next func(net.Conn) net.Conn) *net.TCPConn {
	for range 8 {
		if t, ok := c.(*net.TCPConn); ok {
			return t
		}
		if c = next(c); c == nil {
			return nil
		}
	}
	return nil
}

// startFloor puts the floor on for the rest of the current response.
func (c *conn) startFloor(rate int64, grace time.Duration) bool {
	if rate <= 0 {
		return false
	}
	if c.tcp == nil {
		if c.tcp = plainTCP(c.rwc); c.tcp == nil {
			return false
		}
	}
	slack := min(time.Duration(float64(floorSlackBytes)/float64(rate)*float64(time.Second)), floorSlackMax)
	c.fl = floor{on: true, rate: float64(rate), grace: grace, ahead: grace + slack,
		tick: max(min(floorTick, grace/2), 100*time.Millisecond)}
	c.fl.due = time.Now().Add(c.fl.ahead)
	return true
}

// endFloor takes the floor and its deadline off after a response.
func (c *conn) endFloor() {
	if c.fl.on {
		c.fl.on = false
		_ = c.setWriteDeadline(time.Time{})
	}
}

// floorWait puts the floor's deadline on before a write waits, unless it
// is on already.
func (c *conn) floorWait() bool {
	if c.fl.armed {
		return true
	}
	c.fl.armed = c.arm(c.fl.next(time.Now()))
	return c.fl.armed
}

func (c *conn) arm(t time.Time) bool {
	return c.setWriteDeadline(t) == nil
}

// setWriteDeadline sets the socket's write deadline, unless it is t
// already: every write deadline of the connection is set here, so wdl
// is what the socket has.
func (c *conn) setWriteDeadline(t time.Time) error {
	if t.Equal(c.wdl) {
		return nil
	}
	if err := c.rwc.SetWriteDeadline(t); err != nil {
		return err
	}
	c.wdl = t
	return nil
}

// floorEnter starts a write under the floor. A writer that had nothing to
// write was not waiting on the client: when its last write ended in time
// (the kernel took it all) the client was keeping up, so the time since
// is not held against it, and the write has at least the grace.
func (c *conn) floorEnter() {
	if c.fl.late {
		return
	}
	if least := time.Now().Add(c.fl.grace); c.fl.due.Before(least) {
		c.fl.due, c.fl.probed = least, false
		if c.fl.armed {
			c.arm(c.fl.next(time.Now()))
		}
	}
}

// floorDone counts the n bytes of a write that ended well. One that ended
// past due, in a probe, leaves the next write a probe of its own but no
// more: a client behind the floor goes on only while the kernel takes
// each write at once.
func (c *conn) floorDone(n int64) {
	now := time.Now()
	c.fl.took(n, now)
	c.fl.late = !c.fl.due.After(now)
	c.fl.probed = false
}

// took counts n bytes the kernel took for the client at now.
func (f *floor) took(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	f.due = f.due.Add(time.Duration(float64(n) / f.rate * float64(time.Second)))
	if limit := now.Add(f.ahead); f.due.After(limit) {
		f.due = limit
	}
}

// next is the deadline for a write from now: due, or a tick from now if
// that is sooner.
func (f *floor) next(now time.Time) time.Time {
	if t := now.Add(f.tick); t.Before(f.due) {
		return t
	}
	return f.due
}

// floorRetry decides, after a write under the floor returned err having
// written n bytes, whether to write on: only after its deadline, and
// while the client keeps the floor (or for one probe past it).
func (c *conn) floorRetry(n int64, err error) bool {
	now := time.Now()
	c.fl.took(n, now)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if c.fl.due.After(now) {
		c.fl.probed = false
		return c.arm(c.fl.next(now))
	}
	if c.fl.probed {
		return false // cut
	}
	c.fl.probed = true
	return c.arm(now.Add(floorProbe))
}

// floorWriter is what the connection's bufio.Writer writes to: the
// connection itself, under the floor when one is on.
type floorWriter struct{ c *conn }

func (w floorWriter) Write(p []byte) (int, error) {
	c := w.c
	if !c.fl.on {
		if c.sock != nil {
			return c.sock.Write(p)
		}
		return c.rwc.Write(p)
	}
	c.floorEnter()
	written := 0
	if c.sock != nil && !c.fl.armed {
		// Most writes go at once: the deadline goes on only for one
		// that has to wait.
		n, err := c.sock.TryWrite(p)
		written = n
		if err == nil && n == len(p) {
			c.floorDone(int64(n))
			return n, nil
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return written, err
		}
		c.fl.took(int64(n), time.Now())
	}
	if !c.floorWait() {
		return written, errFloorDeadline
	}
	for {
		var n int
		var err error
		if c.sock != nil {
			n, err = c.sock.Write(p[written:])
		} else {
			n, err = c.tcp.Write(p[written:])
		}
		written += n
		if err == nil {
			c.floorDone(int64(n))
			return written, nil
		}
		if !c.floorRetry(int64(n), err) {
			return written, err
		}
	}
}

// errFloorDeadline fails a write under the floor whose deadline could
// not be set: the connection is closed.
var errFloorDeadline = errors.New("h1serve: cannot set the write deadline")
