package gateway_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/wakegate/wakegate/admin"
)

// TestAdminHomesPaging registers homes through the admin API of a real
// gateway and pages through them with the cursor and the filters.
func TestAdminHomesPaging(t *testing.T) {
	t.Parallel()
	const n = 120
	a := admStart(t, admDemo, "")
	for i := range n {
		id := fmt.Sprintf("user-%03d", i)
		if code, _, body := a.do(t, "PUT", "/admin/homes/"+id, admToken, nil, map[string]string{"target": id}); code != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, code, body)
		}
	}
	pageAll := func(query string) (ids []string, total int) {
		t.Helper()
		cursor := ""
		for pages := 0; pages <= n; pages++ {
			code, _, body := a.do(t, "GET", "/admin/homes?"+query+"&cursor="+url.QueryEscape(cursor), admToken, nil, nil)
			if code != http.StatusOK {
				t.Fatalf("page: %d %s", code, body)
			}
			p := admDecode[admin.HomePage](t, body)
			for _, h := range p.Homes {
				ids = append(ids, h.ID)
			}
			if p.NextCursor == "" {
				return ids, p.Total
			}
			cursor = p.NextCursor
		}
		t.Fatal("paging does not end")
		return nil, 0
	}
	ids, total := pageAll("limit=25")
	if len(ids) != n+1 || total != n+1 || ids[0] != "demo" || ids[1] != "user-000" || ids[n] != fmt.Sprintf("user-%03d", n-1) {
		t.Fatalf("%d homes (total %d) over the pages: first %v", len(ids), total, ids[:3])
	}
	if ids, total = pageAll("limit=7&q=USER-01"); len(ids) != 10 || total != 10 {
		t.Errorf("q=USER-01: %v (total %d)", ids, total)
	}
	if ids, _ = pageAll("limit=50&status=sleeping&version=1"); len(ids) != n+1 {
		t.Errorf("status=sleeping&version=1: %d homes", len(ids))
	}
	if ids, _ = pageAll("version=9"); len(ids) != 0 {
		t.Errorf("version=9: %v", ids)
	}
	if code, _, _ := a.do(t, "GET", "/admin/homes?limit=0", admToken, nil, nil); code != http.StatusBadRequest {
		t.Errorf("limit=0: %d", code)
	}
}
