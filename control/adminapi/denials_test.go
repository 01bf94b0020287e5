package adminapi_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/control/adminapi"
)

// TestDenialsRing proves that the denial log shows the last refusals
// newest first once its ring has wrapped, and counts every refusal (not
// only those it still shows) by policy and code, most frequent first,
// also when the request path adds from many goroutines at once.
func TestDenialsRing(t *testing.T) {
	const kept = 4
	d := adminapi.NewDenials(kept)
	api := adminapi.New(adminapi.Deps[adminapi.Home]{Denials: d})
	if v := api.AccessDenials(); len(v.Recent) != 0 || len(v.Counts) != 0 || v.Recent == nil || v.Counts == nil {
		t.Fatalf("empty log %+v; want empty lists, not null", v)
	}
	for i := range 10 {
		code := "forbidden"
		if i%5 == 0 {
			code = "rate_limited"
		}
		d.Add(admin.Denial{Policy: "jwt", Code: code, RequestID: strconv.Itoa(i)})
	}
	v := api.AccessDenials()
	if len(v.Recent) != kept {
		t.Fatalf("%d recent; want %d", len(v.Recent), kept)
	}
	for i, r := range v.Recent {
		if want := strconv.Itoa(9 - i); r.RequestID != want {
			t.Errorf("recent[%d] is request %s; want %s (newest first)", i, r.RequestID, want)
		}
	}
	want := []admin.DenialCount{{Policy: "jwt", Code: "forbidden", Count: 8}, {Policy: "jwt", Code: "rate_limited", Count: 2}}
	if len(v.Counts) != len(want) || v.Counts[0] != want[0] || v.Counts[1] != want[1] {
		t.Errorf("counts %+v; want %+v", v.Counts, want)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				d.Add(admin.Denial{Policy: "forward_auth", Code: "unauthorized"})
				_ = api.AccessDenials()
			}
		})
	}
	wg.Wait()
	if c := api.AccessDenials().Counts[0]; c.Policy != "forward_auth" || c.Count != 800 {
		t.Errorf("after concurrent adds the top count is %+v; want forward_auth 800", c)
	}
}
