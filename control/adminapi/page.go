package adminapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wakerecord"
)

// PageHomes answers one page of GET /admin/homes in id order
// (admin.HomePager). Without filters it reads the page's records from the
// store with a cursor, and no more (the total is the number of routed
// homes); filters run in memory (pageFiltered). A page of everything (no
// limit) is the whole list.
func (a *Backend[H]) PageHomes(ctx context.Context, q admin.HomeQuery) (admin.HomePage, error) {
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
	p := admin.HomePage{Homes: []admin.HomeView{}, Total: a.d.Homes.Count()}
	err := registry.ScanHomes(ctx, a.d.Store, q.After, func(rec registry.Home) bool {
		h, ok := a.d.Homes.WithID(rec.ID)
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
// route table and the engine hold in memory (id, target, and wakerecord.Brief:
// status, version, a wake in flight), so that counting the matches among
// 100,000 homes reads no record; then the records of the page's homes
// are read, one each. A home whose record no longer matches (another
// gateway of a fleet changed it, and this one has not read it since) is
// left out of the page.
func (a *Backend[H]) pageFiltered(ctx context.Context, q admin.HomeQuery) (admin.HomePage, error) {
	p := admin.HomePage{Homes: []admin.HomeView{}}
	type match struct {
		id string
		h  H
	}
	var next []match
	a.d.Homes.Each(func(h H) bool {
		s := h.Spec()
		b, ok := a.d.Engine.Brief(s.ID)
		if !ok || !q.Match(briefView(s, b)) {
			return true
		}
		p.Total++
		if s.ID > q.After {
			next = append(next, match{s.ID, h})
		}
		return true
	})
	slices.SortFunc(next, func(x, y match) int { return strings.Compare(x.id, y.id) })
	for _, m := range next {
		if len(p.Homes) == q.Limit {
			p.NextCursor = admin.Cursor(p.Homes[len(p.Homes)-1].ID)
			break
		}
		h := m.h
		rec, err := a.d.Store.GetHome(ctx, m.id)
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

// briefView is what the list's filters read of the home of s, from
// memory.
func briefView(s homes.Spec, b wakerecord.Brief) admin.HomeView {
	v := admin.HomeView{ID: s.ID, Target: s.Target, Version: b.Version, Status: string(b.Status)}
	if b.Waking {
		v.Wake = &admin.WakeProgress{}
	}
	return v
}

// brief is what the list's filters read of h (admin.HomeQuery.Match).
func (a *Backend[H]) brief(h H, rec registry.Home) admin.HomeView {
	s := h.Spec()
	v := admin.HomeView{ID: s.ID, Target: s.Target, Version: rec.Version, Status: string(rec.Status)}
	if _, _, waking := a.d.Engine.Progress(s.ID); waking {
		v.Wake = &admin.WakeProgress{}
	}
	return v
}
