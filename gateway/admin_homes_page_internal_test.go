package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/registry"
)

// scanCounter is a store that counts the home records its scans and
// single reads read, and the whole-list reads made of it.
type scanCounter struct {
	registry.Store
	read, lists atomic.Int64
}

func (s *scanCounter) GetHome(ctx context.Context, id string) (registry.Home, error) {
	s.read.Add(1)
	return s.Store.GetHome(ctx, id)
}

func (s *scanCounter) ScanHomes(ctx context.Context, after string, fn func(registry.Home) bool) error {
	return registry.ScanHomes(ctx, s.Store, after, func(h registry.Home) bool {
		s.read.Add(1)
		return fn(h)
	})
}

func (s *scanCounter) ListHomes(ctx context.Context) ([]registry.Home, error) {
	s.lists.Add(1)
	return s.Store.ListHomes(ctx)
}

// TestAdminPageReadsThePage proves that a page of the home list reads the
// records of the page (and, without filters, one more, to know whether
// another page follows), wherever the cursor is, and never the whole
// list: filters and the count of their matches run on what the gateway
// holds in memory. It counts store reads: no timing.
func TestAdminPageReadsThePage(t *testing.T) {
	g := claimGateway(t, "")
	ctx := context.Background()
	const n = 300
	for i := range n {
		req := admin.HomeRequest{}
		if i%10 == 3 {
			req.Version = "2"
		}
		if _, _, err := g.adminBackend().PutHome(ctx, fmt.Sprintf("h%04d", i), req, 0); err != nil {
			t.Fatal(err)
		}
	}
	sc := &scanCounter{Store: g.store}
	g.store = sc
	api := g.adminBackend()
	for _, tc := range []struct {
		name     string
		q        admin.HomeQuery
		first    string // the first id of the page
		maxReads int64
		total    int
	}{
		{"first page", admin.HomeQuery{Limit: 10}, "cfg", 11, n + 1},
		{"a page deep in the list", admin.HomeQuery{Limit: 10, After: "h0200"}, "h0201", 11, n + 1},
		{"the last page", admin.HomeQuery{Limit: 10, After: "h0295"}, "h0296", 11, n + 1},
		{"a search reads the page", admin.HomeQuery{Limit: 10, Q: "h01"}, "h0100", 10, 100},
		{"a search's next page", admin.HomeQuery{Limit: 10, Q: "h01", After: "h0109"}, "h0110", 10, 100},
		{"a version filter", admin.HomeQuery{Limit: 10, Version: "2"}, "h0003", 10, n / 10},
		{"a version filter deep in the list", admin.HomeQuery{Limit: 10, Version: "2", After: "h0253"}, "h0263", 10, n / 10},
		{"a status filter", admin.HomeQuery{Limit: 10, Status: "sleeping"}, "cfg", 10, n + 1},
	} {
		sc.read.Store(0)
		p, err := api.PageHomes(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(p.Homes) == 0 || p.Homes[0].ID != tc.first || p.Total != tc.total {
			t.Errorf("%s: %d homes from %v, total %d; want from %s, total %d", tc.name, len(p.Homes), p.Homes, p.Total, tc.first, tc.total)
		}
		for _, h := range p.Homes {
			if !tc.q.Match(h) {
				t.Errorf("%s: home %s (status %s, version %s) does not match", tc.name, h.ID, h.Status, h.Version)
			}
		}
		if r := sc.read.Load(); r > tc.maxReads {
			t.Errorf("%s: read %d records, want at most %d", tc.name, r, tc.maxReads)
		}
	}
	if l := sc.lists.Load(); l != 0 {
		t.Errorf("paged lists read the whole list %d times", l)
	}
}
