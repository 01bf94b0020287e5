package h1serve

import "time"

// Each connection is served on a goroutine of its own, as net/http serves
// it, but a goroutine that has served one does not end at once: it waits
// a while for the next connection the listener accepts. A goroutine's
// stack starts small and is copied to a larger one each time the calls
// need more; serving a proxied request takes it through several copies.
// A connection that carries a single request (a client without
// keep-alive, a burst of callers dialling at once) paid those copies, and
// the goroutine's start, every time; a waiting goroutine has its stack
// grown already. At most maxIdleWorkers wait at once, each for at most
// idleWorker, and Shutdown and Close end their wait.

// maxIdleWorkers bounds the goroutines waiting for a connection. Each
// holds the stack it grew (a few KiB to some tens) while it waits, until
// a collection finds it mostly unused and halves it.
const maxIdleWorkers = 256

// idleWorker is how long a goroutine waits for the next connection.
const idleWorker = 2 * time.Second

// dispatch serves c on a goroutine that waits for one, or on a new one.
func (s *Server) dispatch(c *conn) {
	select {
	case s.next <- c:
	default:
		s.started.Add(1)
		go s.work(c)
	}
}

// work serves c, then each connection handed to it while it waits.
func (s *Server) work(c *conn) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for c != nil {
		c.serve()
		c = s.await(&t)
	}
}

// await waits for the next connection with the timer *t (made at the
// first wait): nil when none came in time, the server closes, or enough
// goroutines wait already.
func (s *Server) await(t **time.Timer) *conn {
	if s.idle.Add(1) > maxIdleWorkers || s.closing.Load() {
		s.idle.Add(-1)
		return nil
	}
	defer s.idle.Add(-1)
	d := s.workerIdle
	if d <= 0 {
		d = idleWorker
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case c := <-s.next:
		return c
	case <-(*t).C:
	case <-s.halt:
	}
	return nil
}
