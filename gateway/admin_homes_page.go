package gateway

import (
	"context"
	"errors"
	"fmt"
	"github.com/wakegate/wakegate/route"
	"slices"
	"strings"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wake"
)

// PageHomes answers one page of GET /admin/homes in id order
// (admin.HomePager). Without filters it reads the page's records from the
// store with a cursor, and no more (the total is the number of routed
// homes); filters run in memory (pageFiltered). A page of everything (no
// limit) is the whole list.
func (a adminAPI) PageHomes(ctx context.Context, q admin.HomeQuery) (admin.HomePage, error) {
	if q.Limit == 0 {
		hs, err := a.ListHomes(ctx)
		if err != nil {
			return admin.HomePage{}, err
		}
		return q.Page(hs), nil
	}
	if q.Filtered() {
		return a.pageFiltered(ctx, q)
	}
	p := admin.HomePage{Homes: []admin.HomeView{}, Total: a.g.homeCount()}
	err := registry.ScanHomes(ctx, a.g.store, q.After, func(rec registry.Home) bool {
		h, ok := a.g.homeWithID(rec.ID)
		if !ok {
			return true // stored, not routed here
		}
		if len(p.Homes) == q.Limit {
			p.NextCursor = admin.Cursor(p.Homes[len(p.Homes)-1].ID)
			return false
		}
		p.Homes = append(p.Homes, a.view(h, rec))
		return true
	})
	if err != nil {
		return admin.HomePage{}, fmt.Errorf("list homes: %w", err)
	}
	return p, nil
}

// pageFiltered answers a page with filters. The filters run on what the
// route table and the engine hold in memory (id, target, and wake.Brief:
// status, version, a wake in flight), so that counting the matches among
// 100,000 homes reads no record; then the records of the page's homes
// are read, one each. A home whose record no longer matches (another
// gateway of a fleet changed it, and this one has not read it since) is
// left out of the page.
func (a adminAPI) pageFiltered(ctx context.Context, q admin.HomeQuery) (admin.HomePage, error) {
	p := admin.HomePage{Homes: []admin.HomeView{}}
	var next []*route.Home
	a.g.eachHome(func(h *route.Home) bool {
		b, ok := a.g.engine.Brief(h.Spec().ID)
		if !ok || !q.Match(briefView(h, b)) {
			return true
		}
		p.Total++
		if h.Spec().ID > q.After {
			next = append(next, h)
		}
		return true
	})
	slices.SortFunc(next, func(x, y *route.Home) int { return strings.Compare(x.Spec().ID, y.Spec().ID) })
	for _, h := range next {
		if len(p.Homes) == q.Limit {
			p.NextCursor = admin.Cursor(p.Homes[len(p.Homes)-1].ID)
			break
		}
		rec, err := a.g.store.GetHome(ctx, h.Spec().ID)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			continue // removed meanwhile
		case err != nil:
			return admin.HomePage{}, fmt.Errorf("list homes: %w", err)
		case !q.Match(a.brief(h, rec)):
			continue
		}
		p.Homes = append(p.Homes, a.view(h, rec))
	}
	return p, nil
}

// briefView is what the list's filters read of h, from memory.
func briefView(h *route.Home, b wake.Brief) admin.HomeView {
	v := admin.HomeView{ID: h.Spec().ID, Target: h.Spec().Target, Version: b.Version, Status: string(b.Status)}
	if b.Waking {
		v.Wake = &admin.WakeProgress{}
	}
	return v
}

// brief is what the list's filters read of h (admin.HomeQuery.Match).
func (a adminAPI) brief(h *route.Home, rec registry.Home) admin.HomeView {
	v := admin.HomeView{ID: h.Spec().ID, Target: h.Spec().Target, Version: rec.Version, Status: string(rec.Status)}
	if _, _, waking := a.g.engine.Progress(h.Spec().ID); waking {
		v.Wake = &admin.WakeProgress{}
	}
	return v
}

var _ admin.HomePager = adminAPI{}
