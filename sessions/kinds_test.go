package sessions

import (
	"testing"
	"time"
)

// TestSessionKinds counts requests, WebSockets and leases apart.
func TestSessionKinds(t *testing.T) {
	s := New()
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	req := s.Begin("h")
	ws := s.Begin("h")
	s.MarkWebSocket(ws)
	long := s.Lease("h", time.Hour)
	s.Lease("h", time.Minute)
	k := s.Kinds("h")
	if k.Requests != 1 || k.WebSockets != 1 || len(k.Leases) != 2 || k.Leases[1].ID != long ||
		!k.Leases[0].ExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("kinds %+v", k)
	}
	s.UnmarkWebSocket(ws)
	s.UnmarkWebSocket(ws) // never below zero
	s.End(ws)
	s.End(req)
	now = now.Add(2 * time.Minute)
	if k := s.Kinds("h"); k.Requests != 0 || k.WebSockets != 0 || len(k.Leases) != 1 {
		t.Fatalf("after the sessions ended and a lease expired: %+v", k)
	}
	if k := s.Kinds("nobody"); k.Requests != 0 || k.Leases == nil {
		t.Fatalf("unknown home: %+v", k)
	}
}
