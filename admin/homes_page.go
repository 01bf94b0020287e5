package admin

import (
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

// homeQuery is the filters and page of GET /admin/homes.
type homeQuery struct {
	limit   int    // 0: every match
	after   string // the last id of the previous page
	status  string
	version string
	q       string // a substring of the id or target
}

// parseHomeQuery reads ?limit=, ?cursor=, ?status=, ?version= and ?q=.
func parseHomeQuery(r *http.Request) (homeQuery, error) {
	v := r.URL.Query()
	hq := homeQuery{status: v.Get("status"), version: v.Get("version"), q: strings.ToLower(v.Get("q"))}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPage {
			return hq, fault.New(fault.Invalid, "invalid", fmt.Sprintf("limit: want 1 to %d, got %q", MaxPage, s)).WithField("limit")
		}
		hq.limit = n
	}
	if c := v.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || len(b) == 0 {
			return hq, fault.New(fault.Invalid, "invalid", "cursor: want the next_cursor of a previous page").WithField("cursor")
		}
		hq.after = string(b)
	}
	return hq, nil
}

// match reports whether h passes the filters.
func (hq homeQuery) match(h HomeView) bool {
	st := h.Status
	if h.Wake != nil {
		st = "waking"
	}
	return (hq.status == "" || st == hq.status) && (hq.version == "" || h.Version == hq.version) &&
		(hq.q == "" || strings.Contains(strings.ToLower(h.ID), hq.q) || strings.Contains(strings.ToLower(h.Target), hq.q))
}

// page filters hs (sorted by id here) and cuts the page after the cursor.
func (hq homeQuery) page(hs []HomeView) HomePage {
	sort.Slice(hs, func(i, j int) bool { return hs[i].ID < hs[j].ID })
	p := HomePage{Homes: []HomeView{}}
	for _, h := range hs {
		if !hq.match(h) {
			continue
		}
		p.Total++
		if hq.after != "" && h.ID <= hq.after {
			continue
		}
		if hq.limit > 0 && len(p.Homes) == hq.limit {
			p.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(p.Homes[len(p.Homes)-1].ID))
			continue
		}
		p.Homes = append(p.Homes, h)
	}
	return p
}
