package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/fault"
)

// Paging of GET /admin/homes.
const (
	// MaxPage is the largest ?limit=.
	MaxPage = 1000
)

// HomePage is the answer of GET /admin/homes: the homes matching the
// filters, by id, and the cursor of the next page ("" on the last).
type HomePage struct {
	Homes      []HomeView `json:"homes"`
	NextCursor string     `json:"next_cursor,omitempty"`
	// Total counts the homes matching the filters, on every page.
	Total int `json:"total"`
}

// HomePager is what a Backend implements to answer a page of GET
// /admin/homes itself, so that a page costs the homes it shows rather
// than every home (without it, the list is ListHomes cut by Page).
type HomePager interface {
	// PageHomes returns the page of homes that q asks for, with the
	// total of matches, as Page would from the whole list.
	PageHomes(ctx context.Context, q HomeQuery) (HomePage, error)
}

// HomeQuery is the filters and page of GET /admin/homes.
type HomeQuery struct {
	// Limit is the page size; 0 asks for every match.
	Limit int
	// After is the last id of the previous page ("" for the first).
	After string
	// Status, Version: exact matches; "" matches all. Status "waking"
	// matches homes with a wake in flight.
	Status, Version string
	// Q is a lower-case part of the id or target; "" matches all.
	Q string
}

// Filtered reports whether q filters (and so the total of matches needs
// every home looked at).
func (hq HomeQuery) Filtered() bool { return hq.Status != "" || hq.Version != "" || hq.Q != "" }

// parseHomeQuery reads ?limit=, ?cursor=, ?status=, ?version= and ?q=.
func parseHomeQuery(r *http.Request) (HomeQuery, error) {
	v := r.URL.Query()
	hq := HomeQuery{Status: v.Get("status"), Version: v.Get("version"), Q: strings.ToLower(v.Get("q"))}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPage {
			return hq, fault.New(fault.Invalid, "invalid", fmt.Sprintf("limit: want 1 to %d, got %q", MaxPage, s)).WithField("limit")
		}
		hq.Limit = n
	}
	if c := v.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || len(b) == 0 {
			return hq, fault.New(fault.Invalid, "invalid", "cursor: want the next_cursor of a previous page").WithField("cursor")
		}
		hq.After = string(b)
	}
	return hq, nil
}

// Match reports whether h passes the filters; only its ID, Target,
// Version, Status and Wake are read.
func (hq HomeQuery) Match(h HomeView) bool {
	st := h.Status
	if h.Wake != nil {
		st = "waking"
	}
	return (hq.Status == "" || st == hq.Status) && (hq.Version == "" || h.Version == hq.Version) &&
		(hq.Q == "" || strings.Contains(strings.ToLower(h.ID), hq.Q) || strings.Contains(strings.ToLower(h.Target), hq.Q))
}

// Cursor is the cursor of the page after the one that ends with id.
func Cursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// Page filters hs (sorted by id here) and cuts the page after the cursor.
func (hq HomeQuery) Page(hs []HomeView) HomePage {
	sort.Slice(hs, func(i, j int) bool { return hs[i].ID < hs[j].ID })
	p := HomePage{Homes: []HomeView{}}
	for _, h := range hs {
		if !hq.Match(h) {
			continue
		}
		p.Total++
		if hq.After != "" && h.ID <= hq.After {
			continue
		}
		if hq.Limit > 0 && len(p.Homes) == hq.Limit {
			p.NextCursor = Cursor(p.Homes[len(p.Homes)-1].ID)
			continue
		}
		p.Homes = append(p.Homes, h)
	}
	return p
}
