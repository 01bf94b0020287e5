package rolls

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// SessionStore is the part of the store a session report needs.
type SessionStore interface {
	// ReportSessions stores instance's session counts by home, for ttl.
	ReportSessions(ctx context.Context, instance string, counts map[string]int, ttl time.Duration) error
	// FleetSessions returns the sessions of home id over the fleet's
	// unexpired reports.
	FleetSessions(ctx context.Context, id string) (int, error)
}

// Reports is this instance's session report to the fleet: rolls subtract
// it from the fleet's count of a home's sessions to learn how many other
// instances hold. No lock is held across a store round-trip: a report in
// flight is kept as pending, and a reader that cannot tell whether the
// store holds the old report or the new one subtracts the smaller of the
// two, so its error is always towards not rolling. Store and Instance are
// set before the first report; the rest is the zero value.
type Reports struct {
	Store    SessionStore
	Instance string

	mu      sync.Mutex
	seq     uint64         // counts report starts and ends
	own     map[string]int // the last report the store accepted
	until   time.Time      // when own expires in the store
	pending map[string]int // the report being written, nil when none
}

// Report reports this instance's session counts to the store for ttl and
// keeps the report, which Others subtracts from the fleet's count.
func (s *Reports) Report(ctx context.Context, counts map[string]int, ttl time.Duration) error {
	s.begin(counts)
	err := s.Store.ReportSessions(ctx, s.Instance, counts, ttl)
	s.end(counts, time.Now().Add(ttl), err == nil)
	if err != nil {
		return fmt.Errorf("report sessions: %w", err)
	}
	return nil
}

// Others returns the sessions other instances report for home id: the
// fleet's count less this instance's own report. When a report starts or
// ends during the read, the smaller of the reports the store may hold is
// subtracted; when more than one report passed, nothing is.
func (s *Reports) Others(ctx context.Context, id string) (int, error) {
	seq0, own0 := s.low(id)
	fleet, err := s.Store.FleetSessions(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("fleet sessions of %s: %w", id, err)
	}
	seq1, own1 := s.low(id)
	own := min(own0, own1)
	if seq1-seq0 > 2 {
		own = 0
	}
	return max(fleet-own, 0), nil
}

// begin notes that counts is being written.
func (s *Reports) begin(counts map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.pending = counts
}

// end notes that the write of counts ended; ok when the store took it.
func (s *Reports) end(counts map[string]int, until time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.pending = nil
	if ok {
		s.own, s.until = counts, until
	}
}

// low returns the report sequence and the fewest sessions of home id the
// store may hold for this instance now.
func (s *Reports) low(id string) (uint64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if time.Now().Before(s.until) {
		n = s.own[id]
	}
	if s.pending != nil {
		n = min(n, s.pending[id])
	}
	return s.seq, n
}
