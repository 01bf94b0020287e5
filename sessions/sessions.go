package sessions

import (
	"sync"
	"sync/atomic"
	"time"
)

// Table counts live sessions per home: in-flight HTTP requests, open
// WebSockets (until their hijacked connection closes) and leases. It is the
// one place sessions are counted; idle suspend and rolls read it.
type Table struct {
	mu    sync.RWMutex
	homes map[string]*Counter
	now   func() time.Time

	// live lists the counters that may have sessions, so that Snapshot
	// (every idle tick, every metrics scrape) costs the homes in use and
	// not every home ever seen. A counter is listed by Begin and Lease
	// (one atomic load when it is listed already) and unlisted by Snapshot
	// once it has none.
	liveMu sync.Mutex
	live   []*Counter
}

// Counter is the session count of one home. Obtain it from Table.Begin
// and hand it back to Table.End exactly once.
type Counter struct {
	id string
	n  atomic.Int64
	// ws is how many of the n sessions are WebSockets (sessions_kinds.go).
	ws atomic.Int64
	// idleSince is when the count last fell to zero (unix nanoseconds).
	idleSince atomic.Int64
	// listed is true while the counter is in Table.live.
	listed atomic.Bool

	mu     sync.Mutex
	leases map[uint64]time.Time // lease id -> expiry
	nextID uint64
}

// New returns an empty session table.
func New() *Table {
	return &Table{homes: map[string]*Counter{}, now: time.Now}
}

func (s *Table) counter(id string) *Counter {
	s.mu.RLock()
	c := s.homes[id]
	s.mu.RUnlock()
	if c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.homes[id]; c == nil {
		c = &Counter{id: id}
		c.idleSince.Store(s.now().UnixNano())
		s.homes[id] = c
	}
	return c
}

// Begin counts one session of home id and returns its counter, to be passed
// to End when the session is over. An empty id counts nothing and returns nil.
func (s *Table) Begin(id string) *Counter {
	if id == "" {
		return nil
	}
	c := s.counter(id)
	c.n.Add(1)
	if !c.listed.Load() {
		s.list(c)
	}
	return c
}

// list puts c in the live list unless it is there.
func (s *Table) list(c *Counter) {
	if c.listed.CompareAndSwap(false, true) {
		s.liveMu.Lock()
		s.live = append(s.live, c)
		s.liveMu.Unlock()
	}
}

// End ends one session begun with Begin. A nil counter is ignored. The count
// never goes below zero.
func (s *Table) End(c *Counter) {
	if c == nil {
		return
	}
	for {
		n := c.n.Load()
		if n <= 0 {
			return
		}
		if c.n.CompareAndSwap(n, n-1) {
			if n == 1 {
				c.idleSince.Store(s.now().UnixNano())
			}
			return
		}
	}
}

// Lease keeps home id counted as in session until ttl has passed or
// EndLease is called. It returns the lease's id.
func (s *Table) Lease(id string, ttl time.Duration) uint64 {
	c := s.counter(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leases == nil {
		c.leases = map[uint64]time.Time{}
	}
	c.nextID++
	c.leases[c.nextID] = s.now().Add(ttl)
	s.list(c)
	return c.nextID
}

// EndLease ends a lease early. It reports whether the lease was live. Ending
// a lease that had already expired leaves the home idle since its expiry.
func (s *Table) EndLease(id string, lease uint64) bool {
	s.mu.RLock()
	c := s.homes[id]
	s.mu.RUnlock()
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.leases[lease]
	if !ok {
		return false
	}
	delete(c.leases, lease)
	now := s.now()
	live := now.Before(exp)
	end := exp
	if live {
		end = now
	}
	if len(c.liveLeasesLocked(now)) == 0 && c.n.Load() == 0 && end.UnixNano() > c.idleSince.Load() {
		c.idleSince.Store(end.UnixNano())
	}
	return live
}

// liveLeasesLocked drops expired leases and returns the live ones. When the
// last lease expires with no other session, idleSince becomes its expiry.
func (c *Counter) liveLeasesLocked(now time.Time) map[uint64]time.Time {
	for id, exp := range c.leases {
		if !now.Before(exp) {
			delete(c.leases, id)
			if exp.UnixNano() > c.idleSince.Load() {
				c.idleSince.Store(exp.UnixNano())
			}
		}
	}
	return c.leases
}

// Count returns the live sessions of home id: requests, WebSockets and
// unexpired leases.
func (s *Table) Count(id string) int {
	s.mu.RLock()
	c := s.homes[id]
	s.mu.RUnlock()
	if c == nil {
		return 0
	}
	return s.countOf(c)
}

func (s *Table) countOf(c *Counter) int {
	n := int(c.n.Load())
	c.mu.Lock()
	n += len(c.liveLeasesLocked(s.now()))
	c.mu.Unlock()
	return n
}

// IdleSince returns when home id last had no session, or the zero time if
// it has sessions now. A home never seen counts as idle since the epoch.
func (s *Table) IdleSince(id string) time.Time {
	if s.Count(id) > 0 {
		return time.Time{}
	}
	s.mu.RLock()
	c := s.homes[id]
	s.mu.RUnlock()
	if c == nil {
		return time.Unix(0, 0)
	}
	return time.Unix(0, c.idleSince.Load())
}

// Touch marks home id as active now without counting a session, so that a
// fresh wake is not suspended before its first request arrives.
func (s *Table) Touch(id string) {
	s.counter(id).idleSince.Store(s.now().UnixNano())
}

// Snapshot returns the live count of every home that has sessions.
func (s *Table) Snapshot() map[string]int {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	out := map[string]int{}
	keep := s.live[:0]
	for _, c := range s.live {
		n := s.countOf(c)
		if n == 0 {
			// Unlisted, then counted again: a Begin in between either
			// sees the flag down and lists the counter itself (after
			// this returns), or is counted here and the counter stays.
			c.listed.Store(false)
			if n = s.countOf(c); n == 0 {
				continue
			}
			if !c.listed.CompareAndSwap(false, true) {
				out[c.id] = n // listed again by that Begin
				continue
			}
		}
		out[c.id] = n
		keep = append(keep, c)
	}
	clear(s.live[len(keep):])
	s.live = keep
	return out
}
