package admin

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// TestHomePaging pages through filtered homes with the cursor: every
// match once, in id order, and the total on each page.
func TestHomePaging(t *testing.T) {
	var hs []HomeView
	for i := range 25 {
		v := "1"
		if i%5 == 0 {
			v = "2"
		}
		hs = append(hs, HomeView{ID: fmt.Sprintf("h%03d", 24-i), Target: fmt.Sprintf("user-%d", 24-i), Version: v, Status: "sleeping"})
	}
	for _, tc := range []struct {
		query string
		want  int
	}{{"limit=10", 25}, {"limit=3&version=2", 5}, {"limit=1000&q=USER-1", 11}, {"status=running", 0}, {"", 25}} {
		t.Run(tc.query, func(t *testing.T) {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 30 {
					t.Fatal("paging does not end")
				}
				r := httptest.NewRequest("GET", "/admin/homes?"+tc.query+"&cursor="+cursor, nil)
				hq, err := parseHomeQuery(r)
				if err != nil {
					t.Fatal(err)
				}
				p := hq.Page(append([]HomeView(nil), hs...))
				if p.Total != tc.want {
					t.Fatalf("total %d, want %d", p.Total, tc.want)
				}
				for _, h := range p.Homes {
					got = append(got, h.ID)
				}
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			if len(got) != tc.want {
				t.Fatalf("%d homes over the pages, want %d: %v", len(got), tc.want, got)
			}
			for i := 1; i < len(got); i++ {
				if got[i-1] >= got[i] {
					t.Fatalf("not in id order or repeated: %v", got)
				}
			}
		})
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "cursor=!!!"} {
		if _, err := parseHomeQuery(httptest.NewRequest("GET", "/admin/homes?"+bad, nil)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
