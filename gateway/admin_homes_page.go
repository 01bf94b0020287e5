package gateway

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/registry"
)

// PageHomes answers one page of GET /admin/homes from the store's records
// in id order (admin.HomePager). Without filters it reads the page and no
// more (the total is the number of routed homes); with filters it looks
// at every record to count the matches, but builds the full view of the
// page's homes only. A page of everything (no limit) is the whole list.
func (a adminAPI) PageHomes(ctx context.Context, q admin.HomeQuery) (admin.HomePage, error) {
	if q.Limit == 0 {
		hs, err := a.ListHomes(ctx)
		if err != nil {
			return admin.HomePage{}, err
		}
		return q.Page(hs), nil
	}
	p := admin.HomePage{Homes: []admin.HomeView{}}
	filtered := q.Filtered()
	from := q.After
	if filtered {
		from = "" // every match counts towards the total
	} else {
		p.Total = a.g.homeCount()
	}
	err := registry.ScanHomes(ctx, a.g.store, from, func(rec registry.Home) bool {
		h, ok := a.g.homeWithID(rec.ID)
		if !ok {
			return true // stored, not routed here
		}
		if filtered {
			if !q.Match(a.brief(h, rec)) {
				return true
			}
			p.Total++
			if q.After != "" && rec.ID <= q.After {
				return true
			}
		}
		if len(p.Homes) == q.Limit {
			p.NextCursor = admin.Cursor(p.Homes[len(p.Homes)-1].ID)
			return filtered // the rest only counts, and only with filters
		}
		p.Homes = append(p.Homes, a.view(h, rec))
		return true
	})
	if err != nil {
		return admin.HomePage{}, adminFault(fmt.Errorf("list homes: %w", err))
	}
	return p, nil
}

// brief is what the list's filters read of h (admin.HomeQuery.Match).
func (a adminAPI) brief(h *homeRoute, rec registry.Home) admin.HomeView {
	v := admin.HomeView{ID: h.spec.ID, Target: h.spec.Target, Version: rec.Version, Status: string(rec.Status)}
	if _, _, waking := a.g.engine.Progress(h.spec.ID); waking {
		v.Wake = &admin.WakeProgress{}
	}
	return v
}

var _ admin.HomePager = adminAPI{}
