package rolls

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// slowReports is the bolt store whose session reports wait for release:
// a report stuck in a slow store round-trip.
type slowReports struct {
	registry.Store
	entered chan struct{}
	release chan struct{}
}

func (s slowReports) ReportSessions(ctx context.Context, instance string, counts map[string]int, ttl time.Duration) error {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.ReportSessions(ctx, instance, counts, ttl)
}

// A roll's read of the fleet's sessions does not wait for a session report
// in flight (no lock is held across the report's store round-trip), and
// while the report is in flight it subtracts the smaller of the old and the
// new report, erring towards not rolling.
func TestOthersDoesNotWaitForReportInFlight(t *testing.T) {
	bolt, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	store := slowReports{Store: bolt, entered: make(chan struct{}), release: make(chan struct{})}
	r := &Reports{Store: store, Instance: "me"}
	ctx := context.Background()

	// The first report goes through: this instance holds 2 sessions of h1,
	// another instance 3.
	go func() { <-store.entered; store.release <- struct{}{} }()
	if err := r.Report(ctx, map[string]int{"h1": 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := bolt.ReportSessions(ctx, "other", map[string]int{"h1": 3}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Others(ctx, "h1"); err != nil || n != 3 {
		t.Fatalf("others = %d, %v; want 3", n, err)
	}

	// The next report (h1 down to 0) is stuck in the store.
	reported := make(chan error, 1)
	go func() { reported <- r.Report(ctx, map[string]int{"h1": 0}, time.Minute) }()
	<-store.entered
	got := make(chan int, 1)
	go func() {
		n, err := r.Others(ctx, "h1")
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	select {
	case n := <-got:
		// The store still holds the old report (2): fleet 5, less the
		// smaller of old and new (0), is 5: more than the truth, never less.
		if n != 5 {
			t.Errorf("others during a report in flight = %d, want 5 (towards not rolling)", n)
		}
	case err := <-reported:
		t.Fatalf("the report finished (%v) before others answered", err)
	case <-time.After(30 * time.Second):
		t.Error("others waited for the session report's store round-trip")
	}
	close(store.release)
	if err := <-reported; err != nil {
		t.Fatal(err)
	}
	if n, err := r.Others(ctx, "h1"); err != nil || n != 3 {
		t.Fatalf("others after the report = %d, %v; want 3", n, err)
	}
}
