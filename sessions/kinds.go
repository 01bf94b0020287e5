package sessions

import (
	"sort"
	"time"
)

// Kinds is the live sessions of one home by kind.
type Kinds struct {
	// Requests are in-flight HTTP requests (WebSocket upgrades excluded).
	Requests int `json:"requests"`
	// WebSockets are open WebSockets, counted from their upgrade request
	// until their hijacked connection closes.
	WebSockets int `json:"websockets"`
	// Leases are the unexpired leases, soonest expiry first.
	Leases []LeaseInfo `json:"leases"`
}

// LeaseInfo is one live lease.
type LeaseInfo struct {
	ID        uint64    `json:"id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// MarkWebSocket counts the session of c, begun with Begin, as a WebSocket
// until UnmarkWebSocket. A nil counter is ignored.
func (s *Table) MarkWebSocket(c *Counter) {
	if c != nil {
		c.ws.Add(1)
	}
}

// UnmarkWebSocket undoes MarkWebSocket; call it before End. The count
// never goes below zero.
func (s *Table) UnmarkWebSocket(c *Counter) {
	if c == nil {
		return
	}
	for {
		n := c.ws.Load()
		if n <= 0 || c.ws.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// Kinds returns the live sessions of home id by kind.
func (s *Table) Kinds(id string) Kinds {
	s.mu.RLock()
	c := s.homes[id]
	s.mu.RUnlock()
	k := Kinds{Leases: []LeaseInfo{}}
	if c == nil {
		return k
	}
	n, ws := int(c.n.Load()), int(c.ws.Load())
	k.WebSockets = min(ws, n)
	k.Requests = n - k.WebSockets
	c.mu.Lock()
	for lid, exp := range c.liveLeasesLocked(s.now()) {
		k.Leases = append(k.Leases, LeaseInfo{ID: lid, ExpiresAt: exp.UTC()})
	}
	c.mu.Unlock()
	sort.Slice(k.Leases, func(i, j int) bool { return k.Leases[i].ExpiresAt.Before(k.Leases[j].ExpiresAt) })
	return k
}
