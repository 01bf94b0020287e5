package wake

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// sessionReports is this instance's session report to the fleet: rolls
// subtract it from the fleet's count of a home's sessions to learn how many
// other instances hold. No lock is held across a store round-trip: a
// report in flight is kept as pending, and a reader that cannot tell
// whether the store holds the old report or the new one subtracts the
// smaller of the two, so its error is always towards not rolling.
type sessionReports struct {
	mu      sync.Mutex
	seq     uint64         // counts report starts and ends
	own     map[string]int // the last report the store accepted
	until   time.Time      // when own expires in the store
	pending map[string]int // the report being written, nil when none
}

// begin notes that counts is being written.
func (s *sessionReports) begin(counts map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.pending = counts
}

// end notes that the write of counts ended; ok when the store took it.
func (s *sessionReports) end(counts map[string]int, until time.Time, ok bool) {
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
func (s *sessionReports) low(id string) (uint64, int) {
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

// reportSessions reports this instance's sessions to the store and keeps
// the report, which others subtracts from the fleet's count.
func (r *roller) reportSessions(ctx context.Context, counts map[string]int, ttl time.Duration) error {
	r.reports.begin(counts)
	sent := time.Now()
	err := r.e.o.Store.ReportSessions(ctx, r.e.o.Instance, counts, ttl)
	r.reports.end(counts, time.Now().Add(ttl), err == nil)
	if err != nil {
		return fmt.Errorf("report sessions: %w", err)
	}
	r.e.own.Lease.Renewed(sent, ttl)
	return nil
}

// others returns the sessions other instances report for home id: the
// fleet's count less this instance's own report. When a report starts or
// ends during the read, the smaller of the reports the store may hold is
// subtracted; when more than one report passed, nothing is.
func (r *roller) others(ctx context.Context, id string) (int, error) {
	seq0, own0 := r.reports.low(id)
	fleet, err := r.e.o.Store.FleetSessions(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("fleet sessions of %s: %w", id, err)
	}
	seq1, own1 := r.reports.low(id)
	own := min(own0, own1)
	if seq1-seq0 > 2 {
		own = 0
	}
	return max(fleet-own, 0), nil
}
