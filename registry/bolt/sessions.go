package bolt

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
)

// Session reports of the embedded store are kept in memory, not in the
// file. A gateway reports its sessions at every idle tick (every second
// by default) so that the other gateways of a fleet see them; with the
// embedded store there are none (bbolt's file lock lets one process open
// the file), and a report that outlives its process is cleared at the next
// open anyway (clearDead). Writing them would cost a transaction, two
// fdatasyncs of state.db, at every tick of an idle gateway, for nobody to
// read. The bucket of reports stays in the file (files of older gateways
// hold it, and clearDead empties it at open); nothing writes it any more.

// sessionReports are the live session reports of the instances that use
// one store, by instance. The zero value is ready.
type sessionReports struct {
	mu     sync.Mutex
	byName map[string]boltSessions
}

// ReportSessions records instance's live session count per home, replacing
// its previous report; the report expires ttl from now. Zero counts are
// dropped, negative ones are an error. The report is kept in memory:
// nothing is written to the file (see the top of this file). Like every
// method, it fails on a closed store and on an ended ctx.
func (b *Store) ReportSessions(ctx context.Context, instance string, counts map[string]int, ttl time.Duration) error {
	if err := registry.CheckReport(instance, counts, ttl); err != nil {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, err)
	}
	kept := make(map[string]int, len(counts))
	for home, n := range counts {
		if n > 0 {
			kept[home] = n
		}
	}
	// A read transaction is the cheap proof that the store is open; it
	// writes nothing.
	err := b.view(ctx, func(*bbolt.Tx) error {
		now := b.clock()
		b.reports.put(instance, kept, now, now.Add(ttl))
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: report sessions of %s: %w", instance, err)
	}
	return nil
}

// FleetSessions returns the sum of unexpired session counts for a home over
// every instance; 0 when none reports it.
func (b *Store) FleetSessions(ctx context.Context, homeID string) (int, error) {
	total := 0
	err := b.view(ctx, func(*bbolt.Tx) error {
		total = b.reports.sum(homeID, b.clock())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("registry: fleet sessions of %s: %w", homeID, err)
	}
	return total, nil
}

// put replaces instance's report with counts, expiring at expires; an
// empty report removes it. Reports expired by now are pruned.
func (r *sessionReports) put(instance string, counts map[string]int, now, expires time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, s := range r.byName {
		if !now.Before(s.Expires) {
			delete(r.byName, name)
		}
	}
	if len(counts) == 0 {
		delete(r.byName, instance)
		return
	}
	if r.byName == nil {
		r.byName = make(map[string]boltSessions)
	}
	r.byName[instance] = boltSessions{Counts: maps.Clone(counts), Expires: expires}
}

// sum returns the sessions of home id over the reports unexpired at now.
func (r *sessionReports) sum(id string, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for _, s := range r.byName {
		if now.Before(s.Expires) {
			total += s.Counts[id]
		}
	}
	return total
}
